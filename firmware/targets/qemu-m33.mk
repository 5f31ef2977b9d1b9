# QEMU mps2-an505: Cortex-M33 (IoTKit/SSE-200), boots Secure, 20 MHz.
# Code: Secure alias of SSRAM1, 0x10000000 (4 MB); data: Secure alias of
# SSRAM2+3, 0x38000000 (4 MB). Secure peripheral aliases: CMSDK timer0
# 0x50000000 (20 MHz), UART0 0x50200000.
QEMU_MACHINE     := mps2-an505
CPU_FLAGS        := -mcpu=cortex-m33 -mfpu=fpv5-sp-d16 -mfloat-abi=hard
PORT             := qemu_mps2
PORT_DEFS        := -DPORT_TIMER_BASE=0x50000000u -DPORT_UART_BASE=0x50200000u -DPORT_TIMER_HZ=20000000u
FLASH_ORIGIN     := 0x10000000
PART_FLASH_BYTES := 4194304
RAM_ORIGIN       := 0x38000000
PART_RAM_BYTES   := 4194304
DEFAULT_APP      := semihost
