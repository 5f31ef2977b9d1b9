# QEMU mps2-an386: Cortex-M4F, 25 MHz.
# Code SSRAM1 0x00000000 (4 MB), data SSRAM2/3 0x20000000 (4 MB).
# Timer: CMSDK timer0 0x40000000 (32-bit down counter, 25 MHz); UART0 0x40004000.
QEMU_MACHINE     := mps2-an386
CPU_FLAGS        := -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard
PORT             := qemu_mps2
PORT_DEFS        := -DPORT_TIMER_BASE=0x40000000u -DPORT_UART_BASE=0x40004000u -DPORT_TIMER_HZ=25000000u
FLASH_ORIGIN     := 0x00000000
PART_FLASH_BYTES := 4194304
RAM_ORIGIN       := 0x20000000
PART_RAM_BYTES   := 4194304
DEFAULT_APP      := semihost
