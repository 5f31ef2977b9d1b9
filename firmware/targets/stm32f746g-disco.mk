# STM32F746G-DISCO: STM32F746NG, Cortex-M7 with single-precision FPU.
# Flash 0x08000000 (1 MB, AXIM); RAM 0x20000000 (320 KB contiguous:
# DTCM 64 KB + SRAM1 240 KB + SRAM2 16 KB). See firmware/ports/stm32f746g_disco.c
# for clock and UART pins.
QEMU_MACHINE     :=
CPU_FLAGS        := -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard
PORT             := stm32f746g_disco
PORT_DEFS        :=
FLASH_ORIGIN     := 0x08000000
PART_FLASH_BYTES := 1048576
RAM_ORIGIN       := 0x20000000
PART_RAM_BYTES   := 327680
DEFAULT_APP      := board
