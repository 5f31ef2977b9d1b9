/*
 * STM32F7 flash driver (RM0385 section 3): single-bank 1 MB STM32F74x/75x,
 * sectors 4 x 32 KB, 1 x 128 KB, 3 x 256 KB from 0x08000000; 32-bit
 * programming (PSIZE x32, needs VDD >= 2.7 V). The D-cache lines of a range
 * are invalidated after erase/program so reads see the new bytes.
 * Not tested on hardware (the QEMU flash driver is the tested one).
 */
#include <stdint.h>
#include <string.h>

#include "board_flash.h"

int32_t board_flash_cut_budget = -1; /* power-cut test hook: QEMU only */

#define F7_FLASH_KEYR (*(volatile uint32_t *)0x40023C04u)
#define F7_FLASH_SR (*(volatile uint32_t *)0x40023C0Cu)
#define F7_FLASH_CR (*(volatile uint32_t *)0x40023C10u)
#define F7_SR_BSY (1u << 16)
#define F7_SR_ERRORS (0xF2u) /* OPERR WRPERR PGAERR PGPERR ERSERR */
#define F7_CR_PG (1u << 0)
#define F7_CR_SER (1u << 1)
#define F7_CR_PSIZE32 (2u << 8)
#define F7_CR_STRT (1u << 16)
#define F7_CR_LOCK (1u << 31)
#define SCB_DCIMVAC (*(volatile uint32_t *)0xE000EF5Cu)

static const uint32_t sector_start[9] = {0x08000000u,
                                         0x08008000u,
                                         0x08010000u,
                                         0x08018000u,
                                         0x08020000u,
                                         0x08040000u,
                                         0x08080000u,
                                         0x080C0000u,
                                         0x08100000u};

static void unlock(void)
{
    if (F7_FLASH_CR & F7_CR_LOCK)
    {
        F7_FLASH_KEYR = 0x45670123u;
        F7_FLASH_KEYR = 0xCDEF89ABu;
    }
}

static int wait_done(void)
{
    while (F7_FLASH_SR & F7_SR_BSY)
    {
    }
    uint32_t sr = F7_FLASH_SR;
    F7_FLASH_SR = sr & (F7_SR_ERRORS | 1u); /* write 1 to clear errors and EOP */
    return (sr & F7_SR_ERRORS) ? -1 : 0;
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
    uint32_t end = addr + len;
    int rc = 0;
    unlock();
    for (uint32_t s = 0; s < 8u && rc == 0; s++)
    {
        if (sector_start[s] >= end || sector_start[s + 1] <= addr)
        {
            continue;
        }
        if (sector_start[s] < addr || sector_start[s + 1] > end)
        {
            rc = -1; /* only whole sectors */
            break;
        }
        F7_FLASH_CR = F7_CR_PSIZE32 | F7_CR_SER | (s << 3);
        F7_FLASH_CR |= F7_CR_STRT;
        rc = wait_done();
    }
    F7_FLASH_CR = F7_CR_LOCK;
    invalidate(addr, len);
    return rc;
}

int board_flash_program(uint32_t addr, const void *src, uint32_t len)
{
    const uint8_t *s = (const uint8_t *)src;
    int rc = 0;
    if ((addr | len) & 3u)
    {
        return -1;
    }
    unlock();
    F7_FLASH_CR = F7_CR_PSIZE32 | F7_CR_PG;
    for (uint32_t i = 0; i < len && rc == 0; i += 4u)
    {
        uint32_t w;
        memcpy(&w, s + i, 4);
        *(volatile uint32_t *)(uintptr_t)(addr + i) = w;
        __asm__ volatile("dsb" ::: "memory");
        rc = wait_done();
    }
    F7_FLASH_CR = F7_CR_LOCK;
    invalidate(addr, len);
    return rc != 0 || memcmp((const void *)(uintptr_t)addr, src, len) != 0 ? -1 : 0;
}

void board_flash_read(uint32_t addr, void *dst, uint32_t len) { memcpy(dst, (const void *)(uintptr_t)addr, len); }
