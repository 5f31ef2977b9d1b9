/*
 * QEMU MPS2 machines with CMSDK peripherals:
 *   mps2-an385 (Cortex-M3), mps2-an386 (Cortex-M4F), mps2-an500 (Cortex-M7):
 *     timer0 0x40000000, UART0 0x40004000, 25 MHz
 *   mps2-an505 (Cortex-M33, boots Secure): the Secure aliases timer0 0x50000000,
 *     UART0 0x50200000, 20 MHz
 * The addresses come from firmware/targets/<target>.mk as -D flags.
 *
 * Timer: CMSDK APB timer, 32-bit down counter; reading it under
 * `-icount shift=8` gives exact instruction counts (see pockmcu/qemu.py).
 * UART: CMSDK APB UART; QEMU ignores the baud divider.
 */
#include "port.h"
#include "semihost.h"

#ifndef PORT_TIMER_BASE
    #define PORT_TIMER_BASE 0x40000000u
#endif
#ifndef PORT_UART_BASE
    #define PORT_UART_BASE 0x40004000u
#endif
#ifndef PORT_TIMER_HZ
    #define PORT_TIMER_HZ 25000000u
#endif

#define REG(addr) (*(volatile uint32_t *)(addr))

#define TIMER_CTRL REG(PORT_TIMER_BASE + 0x00u)
#define TIMER_VALUE REG(PORT_TIMER_BASE + 0x04u)
#define TIMER_RELOAD REG(PORT_TIMER_BASE + 0x08u)

#define UART_DATA REG(PORT_UART_BASE + 0x00u)
#define UART_STATE REG(PORT_UART_BASE + 0x04u)
#define UART_CTRL REG(PORT_UART_BASE + 0x08u)
#define UART_BAUDDIV REG(PORT_UART_BASE + 0x10u)
#define UART_STATE_TXFULL 1u
#define UART_STATE_RXFULL 2u

void port_init(void)
{
    TIMER_CTRL = 0u;
    TIMER_RELOAD = 0xFFFFFFFFu;
    TIMER_VALUE = 0xFFFFFFFFu;
    TIMER_CTRL = 1u; /* enable, no interrupt, internal clock */

    UART_BAUDDIV = 16u;
    UART_CTRL = 3u; /* TX and RX enable */
}

uint32_t port_timer_read(void) { return ~TIMER_VALUE; }

uint32_t port_timer_hz(void) { return PORT_TIMER_HZ; }

void port_uart_putc(int c)
{
    while (UART_STATE & UART_STATE_TXFULL)
    {
    }
    UART_DATA = (uint32_t)(c & 0xFF);
}

int port_uart_getc(void)
{
    while (!(UART_STATE & UART_STATE_RXFULL))
    {
    }
    return (int)(UART_DATA & 0xFFu);
}

void port_console_puts(const char *s) { sh_write0(s); }

void port_exit(int status) { sh_exit(status); }
