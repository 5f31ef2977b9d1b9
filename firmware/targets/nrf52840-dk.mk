# nRF52840-DK (PCA10056): nRF52840, Cortex-M4F at 64 MHz.
# Flash 0x00000000 (1 MB); RAM 0x20000000 (256 KB). No SoftDevice.
# See firmware/ports/nrf52840_dk.c for clock and UART pins.
QEMU_MACHINE     :=
CPU_FLAGS        := -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard
PORT             := nrf52840_dk
PORT_DEFS        :=
FLASH_ORIGIN     := 0x00000000
PART_FLASH_BYTES := 1048576
RAM_ORIGIN       := 0x20000000
PART_RAM_BYTES   := 262144
DEFAULT_APP      := board
