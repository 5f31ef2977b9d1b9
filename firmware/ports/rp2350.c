/*
 * Raspberry Pi Pico 2 (RP2350A, Arm Cortex-M33 core 0, Secure). Compiles and
 * links; the UART is not implemented yet (putc drops bytes, getc returns -1),
 * so use APP=semihost with a debug probe (SWD) on this board for now.
 *
 * Memory: XIP flash 0x10000000 (4 MB on the Pico 2), SRAM 0x20000000 520 KB.
 *   The bootrom needs an IMAGE_DEF block in the first 4 KB of flash: the
 *   20-byte minimum Arm/Secure/RP2350 block below, placed right after the
 *   vector table by the linker script (section .embedded_block).
 * Clock: the bootrom leaves clk_sys on the ring oscillator (~11 MHz, not
 *   exact). For 150 MHz: XOSC 12 MHz, PLL_SYS VCO 1500 MHz /5 /2.
 * UART pins: UART0 TX = GP0, RX = GP1 (Pico 2 header pins 1 and 2),
 *   115200 8N1 once clk_peri is running.
 * Timer: DWT_CYCCNT at the core clock.
 */
#include "board_common.h"
#include "port.h"

#define CORE_HZ 11000000u /* nominal ROSC; see above */

__attribute__((section(".embedded_block"), used, aligned(4))) const uint32_t pockmcu_rp2350_image_def[5] = {
    0xFFFFDED3u, /* PICOBIN_BLOCK_MARKER_START */
    0x10210142u, /* IMAGE_TYPE: EXE, Secure, Arm, RP2350 */
    0x000001FFu, /* LAST item, 1 word of items */
    0x00000000u, /* link to self: the only block */
    0xAB123579u, /* PICOBIN_BLOCK_MARKER_END */
};

void port_init(void) { bc_dwt_start(); }

uint32_t port_timer_read(void) { return bc_dwt_read(); }
uint32_t port_timer_hz(void) { return CORE_HZ; }

void port_uart_putc(int c) { (void)c; }

int port_uart_getc(void) { return -1; }

void port_console_puts(const char *s) { (void)s; }

void port_exit(int status)
{
    (void)status;
    bc_park();
    for (;;)
    {
    }
}
