/*
 * NUCLEO-H743ZI (STM32H743ZIT6, Cortex-M7 + DP FPU). Not tested on hardware
 * yet; the QEMU targets are the tested ones.
 *
 * Memory: flash 0x08000000 2 MB; RAM: AXI SRAM 0x24000000 512 KB (used);
 *   DTCM 0x20000000 128 KB, SRAM1-3 0x30000000 288 KB, SRAM4 0x38000000 64 KB.
 * Clock: runs at the reset clock, HSI 64 MHz. For full speed (480 MHz, rev V):
 *   VOS0, PLL1 from HSE 8 MHz (ST-LINK MCO) M=1 N=120 P=2, 4 flash wait states.
 * UART: USART3 on the ST-LINK virtual COM port, TX = PD8, RX = PD9 (AF7),
 *   115200 8N1 from the default kernel clock PCLK1 = 64 MHz.
 * Timer: DWT_CYCCNT at the core clock.
 */
#include "board_common.h"
#include "port.h"

#define CORE_HZ 64000000u
#define BAUD 115200u

#define RCC_AHB4ENR BC_REG(0x580244E0u)
#define RCC_APB1LENR BC_REG(0x580244E8u)
#define GPIOD_MODER BC_REG(0x58020C00u)
#define GPIOD_AFRH BC_REG(0x58020C24u)
#define USART3_CR1 BC_REG(0x40004800u)
#define USART3_BRR BC_REG(0x4000480Cu)
#define USART3_ISR BC_REG(0x4000481Cu)
#define USART3_RDR BC_REG(0x40004824u)
#define USART3_TDR BC_REG(0x40004828u)
#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)

void port_init(void)
{
    bc_m7_enable_caches();
    bc_dwt_start();

    RCC_AHB4ENR |= 1u << 3;   /* GPIOD */
    RCC_APB1LENR |= 1u << 18; /* USART3 */
    (void)RCC_APB1LENR;
    GPIOD_MODER = (GPIOD_MODER & ~(0xFu << 16)) | (0xAu << 16); /* PD8, PD9 AF */
    GPIOD_AFRH = (GPIOD_AFRH & ~0xFFu) | 0x77u;                 /* AF7, AF7 */
    USART3_BRR = (CORE_HZ + BAUD / 2u) / BAUD;
    USART3_CR1 = (1u << 0) | (1u << 2) | (1u << 3); /* UE RE TE */
}

uint32_t port_timer_read(void) { return bc_dwt_read(); }
uint32_t port_timer_hz(void) { return CORE_HZ; }

void port_uart_putc(int c)
{
    while (!(USART3_ISR & ISR_TXE))
    {
    }
    USART3_TDR = (uint32_t)(c & 0xFF);
}

int port_uart_getc(void)
{
    while (!(USART3_ISR & ISR_RXNE))
    {
    }
    return (int)(USART3_RDR & 0xFFu);
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
