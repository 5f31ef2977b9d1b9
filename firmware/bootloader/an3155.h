/*
 * The subset of the STM32 system-memory bootloader protocol (ST AN3155) that
 * flashing needs, for the QEMU machines (a real STM32 has it in ROM):
 * 0x7F synchronisation, GET, GET_VERSION, GET_ID, READ_MEMORY, GO,
 * WRITE_MEMORY, ERASE and EXTENDED_ERASE, XOR checksums, ACK 0x79 / NACK 0x1F.
 * Serial 8 bits; a real STM32 wants even parity, the QEMU UART ignores it.
 */
#ifndef POCKMCU_BOOTLOADER_AN3155_H
#define POCKMCU_BOOTLOADER_AN3155_H

#include <stdint.h>

#define BL_ACK 0x79u
#define BL_NACK 0x1Fu
#define BL_SYNC 0x7Fu

#define BL_CMD_GET 0x00u
#define BL_CMD_GET_VERSION 0x01u
#define BL_CMD_GET_ID 0x02u
#define BL_CMD_READ_MEMORY 0x11u
#define BL_CMD_GO 0x21u
#define BL_CMD_WRITE_MEMORY 0x31u
#define BL_CMD_ERASE 0x43u
#define BL_CMD_EXTENDED_ERASE 0x44u

#define BL_VERSION 0x31u

/* platform hooks */
int bl_getc(void);
void bl_putc(uint8_t b);
void bl_go(uint32_t addr); /* start the image; returns only if it cannot */

/* Serve the protocol forever (from the 0x7F synchronisation on). */
void bl_serve(void) __attribute__((noreturn));

/* 1 if a plausible image starts at addr (stack pointer in RAM, Thumb reset vector in the app region). */
int bl_image_valid(uint32_t addr);

#endif
