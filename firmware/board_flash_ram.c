/*
 * Flash driver for code memory that is RAM: the QEMU machines (their "flash"
 * is SSRAM or ITCM the guest can write) and the host simulation. NOR rules
 * are emulated so a missing erase shows up: erase writes 0xFF, programming
 * ANDs the new bits in.
 *
 * Power-cut hook (QEMU checkpoint test, host simulation): when
 * board_flash_cut_budget >= 0, every byte erased or programmed spends one
 * unit; when it reaches 0 the next byte is not written and
 * board_power_cut() is called instead (it does not return).
 *
 * BOARD_FLASH_MEM(addr) maps an address to memory; by default the address
 * itself (QEMU), the host simulation defines it to index a byte array.
 */
#include <stdint.h>
#include <string.h>

#include "board_flash.h"

#ifndef BOARD_FLASH_MEM
    #define BOARD_FLASH_MEM(addr) ((volatile uint8_t *)(uintptr_t)(addr))
#endif
#ifndef BOARD_FLASH_TORN
    /* what an interrupted program leaves in the byte it was writing: unchanged */
    #define BOARD_FLASH_TORN(addr, old, new) (old)
#endif
#ifndef BOARD_FLASH_ERASE_FILL
    /* what an interrupted erase leaves in the bytes it has not reached yet: unchanged */
    #define BOARD_FLASH_ERASE_FILL(addr, old) (old)
#endif

int32_t board_flash_cut_budget = -1;
void board_power_cut(void) __attribute__((noreturn));

static void spend(void)
{
    if (board_flash_cut_budget < 0)
    {
        return;
    }
    if (board_flash_cut_budget == 0)
    {
        board_power_cut();
    }
    board_flash_cut_budget--;
}

static int range_ok(uint32_t addr, uint32_t len)
{
    /* addr below the base wraps around to a large offset */
    return len <= BOARD_FLASH_SIZE && addr - BOARD_FLASH_BASE <= BOARD_FLASH_SIZE - len;
}

static void cut_erase(uint32_t addr, uint32_t len, uint32_t done)
{
    /* the power went at byte `done` of an erase: the rest is whatever the model of an interrupted erase says */
    for (uint32_t i = done; i < len; i++)
    {
        volatile uint8_t *p = BOARD_FLASH_MEM(addr + i);
        *p = (uint8_t)BOARD_FLASH_ERASE_FILL(addr + i, *p);
    }
}

int board_flash_erase(uint32_t addr, uint32_t len)
{
    if ((addr - BOARD_FLASH_BASE) % BOARD_FLASH_SECTOR_BYTES != 0u || len % BOARD_FLASH_SECTOR_BYTES != 0u ||
        !range_ok(addr, len))
    {
        return -1;
    }
    for (uint32_t i = 0; i < len; i++)
    {
        if (board_flash_cut_budget == 0)
        {
            cut_erase(addr, len, i);
        }
        spend();
        *BOARD_FLASH_MEM(addr + i) = 0xFFu;
    }
    return 0;
}

int board_flash_program(uint32_t addr, const void *src, uint32_t len)
{
    const uint8_t *s = (const uint8_t *)src;
    if ((addr - BOARD_FLASH_BASE) % BOARD_FLASH_PROG_BYTES != 0u || len % BOARD_FLASH_PROG_BYTES != 0u ||
        !range_ok(addr, len))
    {
        return -1;
    }
    for (uint32_t i = 0; i < len; i++)
    {
        volatile uint8_t *p = BOARD_FLASH_MEM(addr + i);
        if (board_flash_cut_budget == 0)
        {
            *p = (uint8_t)BOARD_FLASH_TORN(addr + i, *p, (uint8_t)(*p & s[i]));
        }
        spend();
        *p = (uint8_t)(*p & s[i]);
    }
    /* verify: fails if the bytes were not erased first */
    for (uint32_t i = 0; i < len; i++)
    {
        if (*BOARD_FLASH_MEM(addr + i) != s[i])
        {
            return -1;
        }
    }
    return 0;
}

void board_flash_read(uint32_t addr, void *dst, uint32_t len)
{
    uint8_t *d = (uint8_t *)dst;
    for (uint32_t i = 0; i < len; i++)
    {
        d[i] = *BOARD_FLASH_MEM(addr + i);
    }
}
