/*
 * System control shared by the board app and the QEMU bootloader: reset,
 * the "stay in the bootloader" request, and starting an image from its
 * vector table (what a reset would do, for an image not at the boot address).
 */
#ifndef POCKMCU_BOARD_SYS_H
#define POCKMCU_BOARD_SYS_H

#include <stdint.h>

#include "port.h"

#define BOARD_SCB_VTOR (*(volatile uint32_t *)0xE000ED08u)
#define BOARD_SCB_AIRCR (*(volatile uint32_t *)0xE000ED0Cu)
#define BOARD_MPU_CTRL (*(volatile uint32_t *)0xE000ED94u)
#define BOARD_SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define BOARD_BOOT_MAGIC 0x544F4F42u /* "BOOT": stay in the bootloader after the next reset */

/*
 * UART receive on the QEMU machines (BOARD_QEMU_UART_BASE: their CMSDK
 * UART0). Two things the generic port_uart_getc() cannot do:
 *  - bytes that reach the UART before the guest enabled its receiver stay
 *    queued in QEMU's chardev until the guest reads the data register (that
 *    read calls qemu_chr_fe_accept_input); a guest that only polls the state
 *    register would wait forever. board_uart_init() reads it once.
 *  - busy-polling the state register keeps QEMU's vCPU thread spinning on
 *    MMIO, which slows the delivery of every byte (3-4x on a loaded host).
 *    Instead the RX interrupt is enabled in the UART and the NVIC with
 *    PRIMASK set (never taken) and the core sleeps in WFI until a byte is
 *    pending.
 * On real boards (BOARD_QEMU_UART_BASE 0) this is port_uart_getc().
 */
#define BOARD_U_REG(off) (*(volatile uint32_t *)(uintptr_t)(BOARD_QEMU_UART_BASE + (off)))
#define BOARD_NVIC_ISER(k) (*(volatile uint32_t *)(uintptr_t)(0xE000E100u + 4u * (k)))
#define BOARD_NVIC_ICPR(k) (*(volatile uint32_t *)(uintptr_t)(0xE000E280u + 4u * (k)))

static inline void board_uart_init(void)
{
#if defined(BOARD_QEMU_UART_BASE)
    if (BOARD_QEMU_UART_BASE != 0u)
    {
        __asm__ volatile("cpsid i" ::: "memory");
        BOARD_U_REG(0x08u) |= 1u << 3; /* CTRL.RXINTEN */
        /* whichever IRQ line UART0 RX is on (0, 32, 33 ...) */
        for (uint32_t k = 0; k < 4u; k++)
        {
            BOARD_NVIC_ISER(k) = 0xFFFFFFFFu;
        }
        (void)BOARD_U_REG(0x00u); /* DATA: unblocks input queued before RX was enabled */
        BOARD_U_REG(0x0Cu) = 2u;  /* INTCLEAR RX */
        for (uint32_t k = 0; k < 4u; k++)
        {
            BOARD_NVIC_ICPR(k) = 0xFFFFFFFFu;
        }
    }
#endif
}

static inline int board_uart_getc(void)
{
#if defined(BOARD_QEMU_UART_BASE)
    if (BOARD_QEMU_UART_BASE != 0u)
    {
        /* wait for STATE.RXFULL */
        while (!(BOARD_U_REG(0x04u) & 2u))
        {
            __asm__ volatile("wfi" ::: "memory");
        }
        int c = (int)(BOARD_U_REG(0x00u) & 0xFFu);
        BOARD_U_REG(0x0Cu) = 2u; /* INTCLEAR RX, then the NVIC's pending bits */
        for (uint32_t k = 0; k < 4u; k++)
        {
            BOARD_NVIC_ICPR(k) = 0xFFFFFFFFu;
        }
        return c;
    }
#endif
    return port_uart_getc();
}

static inline void board_system_reset(void) __attribute__((noreturn));
static inline void board_system_reset(void)
{
    __asm__ volatile("dsb" ::: "memory");
    BOARD_SCB_AIRCR = 0x05FA0004u; /* VECTKEY | SYSRESETREQ */
    __asm__ volatile("dsb" ::: "memory");
    for (;;)
    {
    }
}

/* Start the image whose vector table is at `vectors`: MSP from word 0, PC
 * from word 1, with the MPU off, the stack limits cleared and the thread back
 * on MSP, as after reset. */
static inline void board_start_image(uint32_t vectors) __attribute__((noreturn));
static inline void board_start_image(uint32_t vectors)
{
    const volatile uint32_t *v = (const volatile uint32_t *)(uintptr_t)vectors;
    uint32_t sp = v[0], pc = v[1];
    BOARD_SYST_CSR = 0u;
    BOARD_MPU_CTRL = 0u;
    BOARD_SCB_VTOR = vectors;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    __asm__ volatile(
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
        "movs r2, #0\n\t"
        "msr psplim, r2\n\t"
        "msr msplim, r2\n\t"
#endif
        "movs r2, #0\n\t"
        "msr control, r2\n\t" /* SPSEL = 0 (MSP), FPCA = 0 */
        "isb\n\t"
        "msr msp, %0\n\t"
        "bx %1\n\t"
        :
        : "r"(sp), "r"(pc)
        : "r2", "memory");
    for (;;)
    {
    }
}

#endif
