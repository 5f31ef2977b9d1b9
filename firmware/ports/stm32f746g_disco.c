/*
 * STM32F746G-DISCO (STM32F746NGH6, Cortex-M7 + SP FPU). Not tested on
 * hardware yet; the QEMU targets are the tested ones.
 *
 * Memory: flash 0x08000000 1 MB (AXIM), RAM 0x20000000 320 KB (DTCM 64 KB +
 *   SRAM1 240 KB + SRAM2 16 KB, contiguous).
 * Clock: runs at the reset clock, HSI 16 MHz (flash 0 wait states). For full
 *   speed (216 MHz): HSE 25 MHz bypass from the ST-LINK MCO, PLLM=25 PLLN=432
 *   PLLP=2, voltage scale 1 + over-drive, 7 flash wait states, APB1 /4, APB2 /2.
 * UART: USART1 on the ST-LINK virtual COM port, TX = PA9, RX = PB7 (AF7),
 *   115200 8N1 from PCLK2 = 16 MHz.
 * Timer: DWT_CYCCNT at the core clock.
 */
#include "board_common.h"
#include "port.h"

#define CORE_HZ 16000000u
#define BAUD 115200u

#define RCC_AHB1ENR BC_REG(0x40023830u)
#define RCC_APB2ENR BC_REG(0x40023844u)
#define GPIOA_MODER BC_REG(0x40020000u)
#define GPIOA_AFRH BC_REG(0x40020024u)
#define GPIOB_MODER BC_REG(0x40020400u)
#define GPIOB_AFRL BC_REG(0x40020420u)
#define USART1_CR1 BC_REG(0x40011000u)
#define USART1_BRR BC_REG(0x4001100Cu)
#define USART1_ISR BC_REG(0x4001101Cu)
#define USART1_RDR BC_REG(0x40011024u)
#define USART1_TDR BC_REG(0x40011028u)
#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)

void port_init(void)
{
    bc_m7_enable_caches();
    bc_dwt_start();

    RCC_AHB1ENR |= (1u << 0) | (1u << 1); /* GPIOA, GPIOB */
    RCC_APB2ENR |= 1u << 4;               /* USART1 */
    (void)RCC_APB2ENR;
    GPIOA_MODER = (GPIOA_MODER & ~(3u << 18)) | (2u << 18); /* PA9 AF */
    GPIOA_AFRH = (GPIOA_AFRH & ~(0xFu << 4)) | (7u << 4);   /* AF7 */
    GPIOB_MODER = (GPIOB_MODER & ~(3u << 14)) | (2u << 14); /* PB7 AF */
    GPIOB_AFRL = (GPIOB_AFRL & ~(0xFu << 28)) | (7u << 28); /* AF7 */
    USART1_BRR = (CORE_HZ + BAUD / 2u) / BAUD;
    USART1_CR1 = (1u << 0) | (1u << 2) | (1u << 3); /* UE RE TE */
}

uint32_t port_timer_read(void) { return bc_dwt_read(); }
uint32_t port_timer_hz(void) { return CORE_HZ; }

void port_uart_putc(int c)
{
    while (!(USART1_ISR & ISR_TXE))
    {
    }
    USART1_TDR = (uint32_t)(c & 0xFF);
}

int port_uart_getc(void)
{
    while (!(USART1_ISR & ISR_RXNE))
    {
    }
    return (int)(USART1_RDR & 0xFFu);
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
