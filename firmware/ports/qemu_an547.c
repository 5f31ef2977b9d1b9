/*
 * QEMU mps3-an547: Corstone SSE-300 with Cortex-M55 (Helium), boots Secure.
 *   ITCM 0x00000000 512 KB (code), DTCM 0x20000000 512 KB (data)
 *   timer: SSE-300 system counter, Secure CNTControl frame at 0x58100000
 *          (CNTCR.EN at +0x0, 64-bit CNTCV at +0x8/+0xC), 32 MHz; we read the
 *          low 32 bits (wraps after 134 s of virtual time)
 *   UART0: CMSDK APB UART, Secure alias 0x59303000
 */
#include "port.h"
#include "semihost.h"

#define REG(addr) (*(volatile uint32_t *)(addr))

#define CNT_BASE 0x58100000u
#define CNTCR REG(CNT_BASE + 0x00u)
#define CNTCV_LO REG(CNT_BASE + 0x08u)
#define CNT_HZ 32000000u

#define UART_BASE 0x59303000u
#define UART_DATA REG(UART_BASE + 0x00u)
#define UART_STATE REG(UART_BASE + 0x04u)
#define UART_CTRL REG(UART_BASE + 0x08u)
#define UART_BAUDDIV REG(UART_BASE + 0x10u)
#define UART_STATE_TXFULL 1u
#define UART_STATE_RXFULL 2u

void port_init(void)
{
    CNTCR = 1u; /* EN */
    UART_BAUDDIV = 16u;
    UART_CTRL = 3u;
}

uint32_t port_timer_read(void) { return CNTCV_LO; }

uint32_t port_timer_hz(void) { return CNT_HZ; }

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
