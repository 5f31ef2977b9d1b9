# QEMU mps3-an547: Cortex-M55 with Helium (Corstone SSE-300), boots Secure, 32 MHz.
# Code ITCM 0x00000000 (512 KB), data DTCM 0x20000000 (512 KB).
# Timer: SSE-300 system counter (CNTControl 0x58100000, 32 MHz); UART0 0x59303000.
QEMU_MACHINE     := mps3-an547
CPU_FLAGS        := -mcpu=cortex-m55 -mfloat-abi=hard
PORT             := qemu_an547
PORT_DEFS        :=
FLASH_ORIGIN     := 0x00000000
PART_FLASH_BYTES := 524288
RAM_ORIGIN       := 0x20000000
PART_RAM_BYTES   := 524288
DEFAULT_APP      := semihost
