# NUCLEO-H743ZI: STM32H743ZI, Cortex-M7 with double-precision FPU.
# Flash 0x08000000 (2 MB); RAM: AXI SRAM 0x24000000 (512 KB, the largest
# contiguous block; DTCM 0x20000000 128 KB is not used by default).
# See firmware/ports/nucleo_h743zi.c for clock and UART pins.
QEMU_MACHINE     :=
CPU_FLAGS        := -mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=hard
PORT             := nucleo_h743zi
PORT_DEFS        :=
FLASH_ORIGIN     := 0x08000000
PART_FLASH_BYTES := 2097152
RAM_ORIGIN       := 0x24000000
PART_RAM_BYTES   := 524288
DEFAULT_APP      := board
