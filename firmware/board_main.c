/*
 * pockmcu board app (APP=board): the generated model behind the framed
 * serial protocol of firmware/PROTOCOL.md - inference, streamed training,
 * parameters in and out, checkpoints in flash that survive power loss.
 *
 * Built by `pockmcu flash` / `pockmcu emulate` (pockmcu/board/firmware.py),
 * which writes board_config.h into the build directory (model hash, flash layout, flash
 * driver) and links the app at BOARD_APP_BASE: after the bootloader on the
 * QEMU machines, at the start of flash on the real boards. The rest of the
 * runtime comes in as one translation unit (the Makefile compiles one app file).
 * Built with PROFILE=1 it also answers PROFILE: per-op timer readings of the
 * last inference (pockmcu_profile_hook, profile_hook.c).
 */
#if defined(__has_include)
    #if !__has_include("board_config.h")
        #error                                                                                                         \
            "board_config.h is missing: build this app with pockmcu flash / pockmcu emulate (pockmcu/board/firmware.py writes it into the build directory)"
    #endif
#endif
#include "board_config.h"

#include "app_common.h"
#include "board_sys.h"

/* The rest of the runtime, one translation unit: each file uses those above it. */
/* clang-format off */
#include "proto/crc32.c"
#include "proto/cobs.c"
#include "proto/frame.c"
#include "proto/checkpoint.c"
#include "proto/board_app.c"
/* clang-format on */
#include BOARD_FLASH_IMPL

extern uint32_t __data_load[];
extern uint32_t __data_start[];
extern uint32_t __data_end[];
extern uint32_t __bss_end[];

static uint32_t up_last, up_ms, up_frac;

/* milliseconds since boot, from the free-running timer (call often enough: it wraps) */
uint32_t board_uptime_ms(void)
{
    uint32_t now = port_timer_read(), hz = port_timer_hz();
    uint32_t d = now - up_last;
    up_last = now;
    uint64_t t = (uint64_t)up_frac + (uint64_t)d * 1000u;
    up_ms += (uint32_t)(t / hz);
    up_frac = (uint32_t)(t % hz);
    return up_ms;
}

void board_putc(uint8_t b) { port_uart_putc(b); }

void board_memory_use(uint32_t *ram_used, uint32_t *stack_used, uint32_t *flash_used)
{
    *ram_used = (uint32_t)(uintptr_t)__bss_end - BOARD_RAM_ORIGIN;
    *stack_used = port_stack_used();
    *flash_used =
        (uint32_t)(uintptr_t)__data_load + (uint32_t)((char *)__data_end - (char *)__data_start) - BOARD_APP_BASE;
}

int board_can_enter_bootloader(void) { return BOARD_BOOTLOADER_KIND != 0; }

/* the QEMU power-loss test: stop writing, reset */
void board_power_cut(void) { board_system_reset(); }

#ifdef POCKMCU_PROFILE
static uint32_t profile_overhead;

void board_profile(uint32_t *timer_hz, uint32_t *overhead_ticks, uint32_t *stack_bytes, const uint32_t **ticks)
{
    *timer_hz = port_timer_hz();
    *overhead_ticks = profile_overhead;
    *stack_bytes = port_stack_size();
    *ticks = pockmcu_profile_ticks;
}
#endif

static void settle(void)
{
    /* let the last response byte leave the UART before resetting (~2 ms) */
    uint32_t t0 = port_timer_read(), wait = port_timer_hz() / 500u;
    while (port_timer_read() - t0 < wait)
    {
    }
}

int main(void)
{
    board_uart_init();
    (void)board_uptime_ms();
#ifdef POCKMCU_PROFILE
    profile_overhead = pockmcu_profile_overhead(); /* before any op writes the readings */
#endif
    board_app_init();
    for (;;)
    {
        int c = board_uart_getc();
        if (c < 0)
        {
            port_console_puts("pockmcu: this port has no UART\n");
            return APP_EXIT_IO;
        }
        int act = board_app_byte((uint8_t)c);
        if (act == BOARD_ACT_RESET)
        {
            settle();
            board_system_reset();
        }
        else if (act == BOARD_ACT_BOOTLOADER)
        {
            settle();
#if BOARD_BOOTLOADER_KIND == 1
            *(volatile uint32_t *)(uintptr_t)BOARD_BOOT_MAGIC_ADDR = BOARD_BOOT_MAGIC;
            board_system_reset();
#elif BOARD_BOOTLOADER_KIND == 2
            board_start_image(BOARD_SYSMEM_ADDR); /* the STM32 ROM bootloader (AN2606) */
#endif
        }
    }
}
