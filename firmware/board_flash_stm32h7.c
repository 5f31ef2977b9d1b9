/*
 * STM32H7 flash driver (RM0433 section 4): STM32H743/753, two banks of
 * 8 x 128 KB sectors (bank 1 0x08000000, bank 2 0x08100000), programmed in
 * 256-bit (32-byte) flash words. D-cache lines are invalidated after
 * erase/program. Not tested on hardware.
 */
#include <stdint.h>
#include <string.h>

#include "board_flash.h"

int32_t board_flash_cut_budget = -1; /* power-cut test hook: QEMU only */

#define H7_FLASH_BASE 0x52002000u
#define H7_REG(bank, off) (*(volatile uint32_t *)(H7_FLASH_BASE + 0x100u * (bank) + (off)))
#define H7_KEYR(b) H7_REG(b, 0x04u)
#define H7_CR(b) H7_REG(b, 0x0Cu)
#define H7_SR(b) H7_REG(b, 0x10u)
#define H7_CCR(b) H7_REG(b, 0x14u)
#define H7_CR_LOCK (1u << 0)
#define H7_CR_PG (1u << 1)
#define H7_CR_SER (1u << 2)
#define H7_CR_PSIZE64 (3u << 4)
#define H7_CR_START (1u << 7)
#define H7_SR_BUSY (0x7u)          /* BSY WBNE QW */
#define H7_SR_ERRORS (0x07EE0000u) /* WRPERR PGSERR STRBERR INCERR OPERR RDPERR RDSERR SNECC DBECC */
#define SCB_DCIMVAC (*(volatile uint32_t *)0xE000EF5Cu)
#define SECTOR 0x20000u

static uint32_t bank_of(uint32_t addr) { return addr >= 0x08100000u ? 1u : 0u; }

static void unlock(uint32_t b)
{
    if (H7_CR(b) & H7_CR_LOCK)
    {
        H7_KEYR(b) = 0x45670123u;
        H7_KEYR(b) = 0xCDEF89ABu;
    }
}

static int wait_done(uint32_t b)
{
    while (H7_SR(b) & H7_SR_BUSY)
    {
    }
    uint32_t sr = H7_SR(b);
    H7_CCR(b) = sr & (H7_SR_ERRORS | (1u << 16));
    return (sr & H7_SR_ERRORS) ? -1 : 0;
}

static void invalidate(uint32_t addr, uint32_t len)
{
    __asm__ volatile("dsb" ::: "memory");
    for (uint32_t a = addr & ~31u; a < addr + len; a += 32u)
    {
        SCB_DCIMVAC = a;
    }
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

int board_flash_erase(uint32_t addr, uint32_t len)
{
    int rc = 0;
    if ((addr - 0x08000000u) % SECTOR || len % SECTOR || addr < 0x08000000u || addr + len > 0x08200000u)
    {
        return -1;
    }
    for (uint32_t a = addr; a < addr + len && rc == 0; a += SECTOR)
    {
        uint32_t b = bank_of(a), snb = ((a - 0x08000000u) / SECTOR) & 7u;
        unlock(b);
        H7_CR(b) = H7_CR_PSIZE64 | H7_CR_SER | (snb << 8);
        H7_CR(b) |= H7_CR_START;
        rc = wait_done(b);
        H7_CR(b) = H7_CR_LOCK;
    }
    invalidate(addr, len);
    return rc;
}

int board_flash_program(uint32_t addr, const void *src, uint32_t len)
{
    const uint8_t *s = (const uint8_t *)src;
    int rc = 0;
    if ((addr | len) & 31u)
    {
        return -1;
    }
    for (uint32_t i = 0; i < len && rc == 0; i += 32u)
    {
        uint32_t b = bank_of(addr + i);
        unlock(b);
        H7_CR(b) = H7_CR_PSIZE64 | H7_CR_PG;
        for (uint32_t k = 0; k < 32u; k += 4u)
        {
            uint32_t w;
            memcpy(&w, s + i + k, 4);
            *(volatile uint32_t *)(uintptr_t)(addr + i + k) = w;
        }
        __asm__ volatile("dsb" ::: "memory");
        rc = wait_done(b);
        H7_CR(b) = H7_CR_LOCK;
    }
    invalidate(addr, len);
    return rc != 0 || memcmp((const void *)(uintptr_t)addr, src, len) != 0 ? -1 : 0;
}

void board_flash_read(uint32_t addr, void *dst, uint32_t len) { memcpy(dst, (const void *)(uintptr_t)addr, len); }
