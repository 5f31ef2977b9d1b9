# Raspberry Pi Pico 2 (RP2350A), Arm Cortex-M33 core 0, Secure.
# Flash (XIP) 0x10000000 (Pico 2: 4 MB; an IMAGE_DEF block follows the vector
# table within the first 4 KB); SRAM 0x20000000 (520 KB).
# See firmware/ports/rp2350.c for clock and UART pins.
QEMU_MACHINE     :=
CPU_FLAGS        := -mcpu=cortex-m33 -mfpu=fpv5-sp-d16 -mfloat-abi=hard
PORT             := rp2350
PORT_DEFS        :=
FLASH_ORIGIN     := 0x10000000
PART_FLASH_BYTES := 4194304
RAM_ORIGIN       := 0x20000000
PART_RAM_BYTES   := 532480
DEFAULT_APP      := board
