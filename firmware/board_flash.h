/*
 * Flash driver of the board runtime: what checkpoints (and the QEMU
 * bootloader) need from a part's flash. One implementation per flash family,
 * chosen by BOARD_FLASH_IMPL in board_config.h:
 *   board_flash_ram.c     QEMU (code memory is RAM; NOR rules are emulated)
 *                         and the host simulation (power cut after any byte)
 *   board_flash_stm32f7.c STM32F7 (sector erase, 32-bit programming)
 *   board_flash_stm32h7.c STM32H7 (128 KB sectors, 256-bit flash words)
 *   board_flash_nrf52.c   nRF52 NVMC (4 KB pages, 32-bit words)
 *   board_flash_rp2350.c  RP2350 (not implemented: returns errors)
 *
 * NOR rules: erase sets a whole sector to 0xFF; programming can only clear
 * bits; addresses and lengths are multiples of BOARD_FLASH_PROG_BYTES for
 * program and of BOARD_FLASH_SECTOR_BYTES for erase. All return 0 on success.
 */
#ifndef POCKMCU_BOARD_FLASH_H
#define POCKMCU_BOARD_FLASH_H

#include <stdint.h>

int board_flash_erase(uint32_t addr, uint32_t len);
int board_flash_program(uint32_t addr, const void *src, uint32_t len);
void board_flash_read(uint32_t addr, void *dst, uint32_t len);

#endif
