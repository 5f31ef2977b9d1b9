/*
 * AN3155 subset, device side. Memory map from board_config.h: the bootloader
 * owns [BOARD_FLASH_BASE, BOARD_APP_BASE); WRITE and ERASE reach only
 * [BOARD_APP_BASE, BOARD_FLASH_BASE + BOARD_FLASH_SIZE) (application and
 * checkpoint area); READ reaches all of flash and RAM. Pages (ERASE page
 * numbers) are BOARD_FLASH_SECTOR_BYTES from BOARD_FLASH_BASE. Every write
 * is verified by read-back before the ACK.
 */
#include "an3155.h"

#include "board_config.h"
#include "board_flash.h"

#define FLASH_END (BOARD_FLASH_BASE + BOARD_FLASH_SIZE)
#define RAM_END (BOARD_RAM_ORIGIN + BOARD_RAM_PART_BYTES)

static uint8_t buf[256] __attribute__((aligned(4)));

static uint8_t rd(void) { return (uint8_t)bl_getc(); }

static int in_range(uint32_t a, uint32_t n, uint32_t lo, uint32_t hi) { return a >= lo && a <= hi && n <= hi - a; }

int bl_image_valid(uint32_t addr)
{
    const volatile uint32_t *v = (const volatile uint32_t *)(uintptr_t)addr;
    uint32_t sp = v[0], pc = v[1];
    return sp > BOARD_RAM_ORIGIN && sp <= RAM_END && (sp & 7u) == 0u && (pc & 1u) == 1u && pc > BOARD_APP_BASE &&
        pc < FLASH_END;
}

/* 4 address bytes (MSB first) + XOR checksum; NACKed here if bad. Returns 1 if good. */
static int rd_addr(uint32_t *addr)
{
    uint8_t b[5];
    for (int i = 0; i < 5; i++)
    {
        b[i] = rd();
    }
    if ((uint8_t)(b[0] ^ b[1] ^ b[2] ^ b[3]) != b[4])
    {
        bl_putc(BL_NACK);
        return 0;
    }
    *addr = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
    return 1;
}

static void cmd_get(void)
{
    static const uint8_t cmds[] = {BL_CMD_GET,
                                   BL_CMD_GET_VERSION,
                                   BL_CMD_GET_ID,
                                   BL_CMD_READ_MEMORY,
                                   BL_CMD_GO,
                                   BL_CMD_WRITE_MEMORY,
                                   BL_CMD_EXTENDED_ERASE};
    bl_putc(BL_ACK);
    bl_putc((uint8_t)sizeof cmds); /* N = bytes that follow - 1: the version + the commands */
    bl_putc(BL_VERSION);
    for (unsigned i = 0; i < sizeof cmds; i++)
    {
        bl_putc(cmds[i]);
    }
    bl_putc(BL_ACK);
}

static void cmd_read(void)
{
    uint32_t addr;
    bl_putc(BL_ACK);
    if (!rd_addr(&addr))
    {
        return;
    }
    if (!in_range(addr, 1, BOARD_FLASH_BASE, FLASH_END) && !in_range(addr, 1, BOARD_RAM_ORIGIN, RAM_END))
    {
        bl_putc(BL_NACK);
        return;
    }
    bl_putc(BL_ACK);
    uint8_t n = rd(), c = rd();
    uint32_t len = (uint32_t)n + 1u;
    if (((unsigned)n ^ (unsigned)c) != 0xFFu ||
        (!in_range(addr, len, BOARD_FLASH_BASE, FLASH_END) && !in_range(addr, len, BOARD_RAM_ORIGIN, RAM_END)))
    {
        bl_putc(BL_NACK);
        return;
    }
    bl_putc(BL_ACK);
    const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)addr;
    for (uint32_t i = 0; i < len; i++)
    {
        bl_putc(p[i]);
    }
}

static void cmd_go(void)
{
    uint32_t addr;
    bl_putc(BL_ACK);
    if (!rd_addr(&addr))
    {
        return;
    }
    if (!in_range(addr, 8, BOARD_APP_BASE, FLASH_END) || !bl_image_valid(addr))
    {
        bl_putc(BL_NACK);
        return;
    }
    bl_putc(BL_ACK);
    bl_go(addr);
}

static void cmd_write(void)
{
    uint32_t addr;
    bl_putc(BL_ACK);
    if (!rd_addr(&addr))
    {
        return;
    }
    if (!in_range(addr, 1, BOARD_APP_BASE, FLASH_END))
    {
        bl_putc(BL_NACK);
        return;
    }
    bl_putc(BL_ACK);
    uint8_t n = rd(), x = n;
    uint32_t len = (uint32_t)n + 1u;
    for (uint32_t i = 0; i < len; i++)
    {
        buf[i] = rd();
        x ^= buf[i];
    }
    uint8_t c = rd();
    if (x != c || !in_range(addr, len, BOARD_APP_BASE, FLASH_END) ||
        (addr - BOARD_FLASH_BASE) % BOARD_FLASH_PROG_BYTES || len % BOARD_FLASH_PROG_BYTES)
    {
        bl_putc(BL_NACK);
        return;
    }
    /* program (NOR: only onto erased bytes) and verify by read-back */
    if (board_flash_program(addr, buf, len) != 0)
    {
        bl_putc(BL_NACK);
        return;
    }
    const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)addr;
    for (uint32_t i = 0; i < len; i++)
    {
        if (p[i] != buf[i])
        {
            bl_putc(BL_NACK);
            return;
        }
    }
    bl_putc(BL_ACK);
}

static int page_ok(uint32_t page)
{
    uint32_t pages = BOARD_FLASH_SIZE / BOARD_FLASH_SECTOR_BYTES;
    uint32_t first = (BOARD_APP_BASE - BOARD_FLASH_BASE) / BOARD_FLASH_SECTOR_BYTES;
    return page >= first && page < pages;
}

static int erase_page(uint32_t page)
{
    return board_flash_erase(BOARD_FLASH_BASE + page * BOARD_FLASH_SECTOR_BYTES, BOARD_FLASH_SECTOR_BYTES);
}

static int erase_all(void) { return board_flash_erase(BOARD_APP_BASE, FLASH_END - BOARD_APP_BASE); }

static void cmd_extended_erase(void)
{
    bl_putc(BL_ACK);
    uint8_t h = rd(), l = rd();
    uint32_t n = ((uint32_t)h << 8) | l;
    uint8_t x = (uint8_t)(h ^ l);
    if (n >= 0xFFF0u)
    {
        uint8_t c = rd();
        /* 0xFFFF mass erase (everything but the bootloader); bank erases are not offered */
        bl_putc(c == x && n == 0xFFFFu && erase_all() == 0 ? BL_ACK : BL_NACK);
        return;
    }
    /* N + 1 page numbers, MSB first; pages are checked before any is erased */
    static uint16_t pages[512];
    uint32_t count = n + 1u;
    int ok = count <= sizeof pages / sizeof pages[0];
    for (uint32_t i = 0; i < count; i++)
    {
        uint8_t a = rd(), b = rd();
        x ^= (uint8_t)(a ^ b);
        uint32_t p = ((uint32_t)a << 8) | b;
        if (ok)
        {
            pages[i] = (uint16_t)p;
        }
        ok = ok && page_ok(p);
    }
    uint8_t c = rd();
    if (!ok || c != x)
    {
        bl_putc(BL_NACK);
        return;
    }
    for (uint32_t i = 0; i < count; i++)
    {
        if (erase_page(pages[i]) != 0)
        {
            bl_putc(BL_NACK);
            return;
        }
    }
    bl_putc(BL_ACK);
}

static void cmd_erase(void)
{
    bl_putc(BL_ACK);
    uint8_t n = rd();
    if (n == 0xFFu)
    {
        uint8_t c = rd();
        bl_putc(c == 0x00u && erase_all() == 0 ? BL_ACK : BL_NACK);
        return;
    }
    uint8_t pages[256], x = n;
    int ok = 1;
    for (uint32_t i = 0; i <= n; i++)
    {
        pages[i] = rd();
        x ^= pages[i];
        ok = ok && page_ok(pages[i]);
    }
    uint8_t c = rd();
    if (!ok || c != x)
    {
        bl_putc(BL_NACK);
        return;
    }
    for (uint32_t i = 0; i <= n; i++)
    {
        if (erase_page(pages[i]) != 0)
        {
            bl_putc(BL_NACK);
            return;
        }
    }
    bl_putc(BL_ACK);
}

void bl_serve(void)
{
    /* anything before the synchronisation byte is ignored */
    while (rd() != BL_SYNC)
    {
    }
    bl_putc(BL_ACK);
    for (;;)
    {
        uint8_t cmd = rd(), inv = rd();
        if (((unsigned)cmd ^ (unsigned)inv) != 0xFFu)
        {
            bl_putc(BL_NACK); /* includes 0x7F 0x7F: a host re-synchronising */
            continue;
        }
        switch (cmd)
        {
        case BL_CMD_GET:
            cmd_get();
            break;
        case BL_CMD_GET_VERSION:
            bl_putc(BL_ACK);
            bl_putc(BL_VERSION);
            bl_putc(0);
            bl_putc(0);
            bl_putc(BL_ACK);
            break;
        case BL_CMD_GET_ID:
            bl_putc(BL_ACK);
            bl_putc(1);
            bl_putc((uint8_t)(BOARD_BOOT_PID >> 8));
            bl_putc((uint8_t)BOARD_BOOT_PID);
            bl_putc(BL_ACK);
            break;
        case BL_CMD_READ_MEMORY:
            cmd_read();
            break;
        case BL_CMD_GO:
            cmd_go();
            break;
        case BL_CMD_WRITE_MEMORY:
            cmd_write();
            break;
        case BL_CMD_EXTENDED_ERASE:
            cmd_extended_erase();
            break;
        case BL_CMD_ERASE:
            cmd_erase();
            break;
        default:
            bl_putc(BL_NACK);
            break;
        }
    }
}
