/*
 * nRF52840 flash driver: NVMC (4 KB pages, 32-bit word writes). Not tested
 * on hardware.
 */
#include <stdint.h>
#include <string.h>

#include "board_flash.h"

int32_t board_flash_cut_budget = -1; /* power-cut test hook: QEMU only */

#define NVMC_READY (*(volatile uint32_t *)0x4001E400u)
#define NVMC_CONFIG (*(volatile uint32_t *)0x4001E504u)
#define NVMC_ERASEPAGE (*(volatile uint32_t *)0x4001E508u)
#define PAGE 4096u

static void wait_ready(void)
{
    while ((NVMC_READY & 1u) == 0u)
    {
    }
}

int board_flash_erase(uint32_t addr, uint32_t len)
{
    if (addr % PAGE || len % PAGE || addr + len > 0x00100000u)
    {
        return -1;
    }
    for (uint32_t a = addr; a < addr + len; a += PAGE)
    {
        NVMC_CONFIG = 2u; /* EEN */
        wait_ready();
        NVMC_ERASEPAGE = a;
        wait_ready();
    }
    NVMC_CONFIG = 0u;
    wait_ready();
    return 0;
}

int board_flash_program(uint32_t addr, const void *src, uint32_t len)
{
    const uint8_t *s = (const uint8_t *)src;
    if ((addr | len) & 3u)
    {
        return -1;
    }
    NVMC_CONFIG = 1u; /* WEN */
    wait_ready();
    for (uint32_t i = 0; i < len; i += 4u)
    {
        uint32_t w;
        memcpy(&w, s + i, 4);
        *(volatile uint32_t *)(uintptr_t)(addr + i) = w;
        wait_ready();
    }
    NVMC_CONFIG = 0u;
    wait_ready();
    return memcmp((const void *)(uintptr_t)addr, src, len) != 0 ? -1 : 0;
}

void board_flash_read(uint32_t addr, void *dst, uint32_t len) { memcpy(dst, (const void *)(uintptr_t)addr, len); }
