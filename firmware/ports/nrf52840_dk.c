/*
 * nRF52840-DK (PCA10056; nRF52840, Cortex-M4F). Not tested on hardware yet;
 * the QEMU targets are the tested ones.
 *
 * Memory: flash 0x00000000 1 MB, RAM 0x20000000 256 KB (no SoftDevice).
 * Clock: 64 MHz CPU; HFXO (32 MHz crystal) is started for an accurate baud rate.
 * UART: UART0 on the J-Link virtual COM port, TX = P0.06, RX = P0.08
 *   (RTS P0.05 / CTS P0.07 unused), 115200 8N1.
 * Timer: DWT_CYCCNT at 64 MHz.
 */
#include "board_common.h"
#include "port.h"

#define CORE_HZ 64000000u
#define PIN_TX 6u
#define PIN_RX 8u

#define CLOCK_TASKS_HFCLKSTART BC_REG(0x40000000u)
#define CLOCK_EVENTS_HFCLKSTARTED BC_REG(0x40000100u)
#define P0_OUTSET BC_REG(0x50000508u)
#define P0_PIN_CNF(n) BC_REG(0x50000700u + 4u * (n))
#define UART0_TASKS_STARTRX BC_REG(0x40002000u)
#define UART0_TASKS_STARTTX BC_REG(0x40002008u)
#define UART0_EVENTS_RXDRDY BC_REG(0x40002108u)
#define UART0_EVENTS_TXDRDY BC_REG(0x4000211Cu)
#define UART0_ENABLE BC_REG(0x40002500u)
#define UART0_PSEL_TXD BC_REG(0x4000250Cu)
#define UART0_PSEL_RXD BC_REG(0x40002514u)
#define UART0_RXD BC_REG(0x40002518u)
#define UART0_TXD BC_REG(0x4000251Cu)
#define UART0_BAUDRATE BC_REG(0x40002524u)

void port_init(void)
{
    CLOCK_EVENTS_HFCLKSTARTED = 0u;
    CLOCK_TASKS_HFCLKSTART = 1u;
    while (CLOCK_EVENTS_HFCLKSTARTED == 0u)
    {
    }
    bc_dwt_start();

    P0_OUTSET = 1u << PIN_TX;
    P0_PIN_CNF(PIN_TX) = 1u; /* output, input buffer disconnected */
    P0_PIN_CNF(PIN_RX) = 0u; /* input */
    UART0_PSEL_TXD = PIN_TX;
    UART0_PSEL_RXD = PIN_RX;
    UART0_BAUDRATE = 0x01D7E000u; /* 115200 */
    UART0_ENABLE = 4u;
    UART0_EVENTS_RXDRDY = 0u;
    UART0_EVENTS_TXDRDY = 0u;
    UART0_TASKS_STARTTX = 1u;
    UART0_TASKS_STARTRX = 1u;
}

uint32_t port_timer_read(void) { return bc_dwt_read(); }
uint32_t port_timer_hz(void) { return CORE_HZ; }

void port_uart_putc(int c)
{
    UART0_TXD = (uint32_t)(c & 0xFF);
    while (UART0_EVENTS_TXDRDY == 0u)
    {
    }
    UART0_EVENTS_TXDRDY = 0u;
}

int port_uart_getc(void)
{
    while (UART0_EVENTS_RXDRDY == 0u)
    {
    }
    UART0_EVENTS_RXDRDY = 0u;
    return (int)(UART0_RXD & 0xFFu);
}

void port_console_puts(const char *s)
{
    while (*s != '\0')
    {
        port_uart_putc(*s++);
    }
}

void port_exit(int status)
{
    (void)status;
    bc_park();
    for (;;)
    {
    }
}
