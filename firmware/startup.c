/*
 * pockmcu Cortex-M startup: vector table, Reset_Handler (stacks, FPU/MVE
 * enable, .data copy, .bss zero, stack painting), fault reporting and the few
 * libc hooks a bare-metal newlib link needs. Works on ARMv7-M and ARMv8-M
 * mainline (Secure state included: the an505/an547 machines boot Secure).
 *
 * Stacks: the program runs on PSP (the STACK_BYTES thread stack), exceptions
 * on MSP (a 256-byte handler stack above it). A thread-stack overflow is
 * caught by PSPLIM on ARMv8-M and by an MPU no-access guard over the lowest
 * 32 bytes of the stack on ARMv7-M; the fault handler, still having a valid
 * MSP, reports it and exits with status 7. (Without this, QEMU's MPS2
 * machines silently ignore writes below the RAM origin.)
 *
 * Symbols come from firmware/pockmcu.ld.S.
 */
#include <stdint.h>
#include <string.h>

#include "port.h"

extern uint32_t __stack_start[];
extern uint32_t __stack_top[];
extern uint32_t __handler_stack_start[];
extern uint32_t __handler_stack_top[];
extern uint32_t __data_load[];
extern uint32_t __data_start[];
extern uint32_t __data_end[];
extern uint32_t __bss_start[];
extern uint32_t __bss_end[];

int main(void);

void Reset_Handler(void) __attribute__((naked, noreturn));
void pockmcu_reset_c(void) __attribute__((noreturn, used));
void Default_Handler(void) __attribute__((noreturn));
void HardFault_Handler(void) __attribute__((naked, noreturn));
void pockmcu_fault_report(const uint32_t *frame, uint32_t exc_return) __attribute__((noreturn, used));

#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SCB_ICSR (*(volatile uint32_t *)0xE000ED04u)
#define SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define SCB_MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define SCB_BFAR (*(volatile uint32_t *)0xE000ED38u)
#define MPU_TYPE (*(volatile uint32_t *)0xE000ED90u)
#define MPU_CTRL (*(volatile uint32_t *)0xE000ED94u)
#define MPU_RNR (*(volatile uint32_t *)0xE000ED98u)
#define MPU_RBAR (*(volatile uint32_t *)0xE000ED9Cu)
#define MPU_RASR (*(volatile uint32_t *)0xE000EDA0u)

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
    #define POCKMCU_V8M 1
#endif
#define GUARD_BYTES 32u

#define STACK_PAINT 0xC0DEFACEu
#define EXIT_ASSERT 4
#define EXIT_FAULT 5
#define EXIT_ABORT 6
#define EXIT_STACK_OVERFLOW 7

typedef void (*vector_t)(void);

/* 16 system vectors; no interrupts are used. */
__attribute__((section(".isr_vector"), used)) const vector_t pockmcu_vectors[16] = {
    (vector_t)(uintptr_t)__handler_stack_top, /* initial MSP: the handler stack */
    Reset_Handler,
    Default_Handler,   /* NMI */
    HardFault_Handler, /* HardFault */
    HardFault_Handler, /* MemManage */
    HardFault_Handler, /* BusFault */
    HardFault_Handler, /* UsageFault */
    HardFault_Handler, /* SecureFault (ARMv8-M) */
    0,
    0,
    0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMonitor */
    0,
    Default_Handler, /* PendSV */
    Default_Handler, /* SysTick */
};

/* Switch the thread to PSP before any C code runs (a C function's frame
 * must not straddle the switch). */
void Reset_Handler(void)
{
    __asm__ volatile(
#ifdef POCKMCU_V8M
        "ldr r0, =__stack_start\n\t"
        "msr psplim, r0\n\t"
        "ldr r0, =__handler_stack_start\n\t"
        "msr msplim, r0\n\t"
#endif
        "ldr r0, =__stack_top\n\t"
        "msr psp, r0\n\t"
        "movs r0, #2\n\t" /* CONTROL.SPSEL = 1: thread mode uses PSP */
        "msr control, r0\n\t"
        "isb\n\t"
        "b pockmcu_reset_c\n\t");
}

void pockmcu_reset_c(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CP10/CP11 full access: FPU (and MVE on Cortex-M55) before any FP code. */
    SCB_CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    memcpy(__data_start, __data_load, (size_t)((char *)__data_end - (char *)__data_start));
    memset(__bss_start, 0, (size_t)((char *)__bss_end - (char *)__bss_start));

    /* Paint the unused stack so port_stack_used() can find the high-water mark. */
    uint32_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile uint32_t *p = __stack_start; (uint32_t)(uintptr_t)p + 64u < sp; p++)
    {
        *p = STACK_PAINT;
    }

#ifndef POCKMCU_V8M
    /* ARMv7-M: MPU region 0 = no-access guard over the stack's lowest 32
     * bytes; the default memory map stays in force elsewhere (PRIVDEFENA). */
    if ((MPU_TYPE >> 8) & 0xFFu)
    {
        MPU_RNR = 0u;
        MPU_RBAR = (uint32_t)(uintptr_t)__stack_start;
        MPU_RASR = (1u << 28) | (4u << 1) | 1u; /* XN, AP = no access, 32 bytes, enable */
        MPU_CTRL = (1u << 2) | 1u;              /* PRIVDEFENA, ENABLE */
        __asm__ volatile("dsb\n\tisb" ::: "memory");
    }
#endif

    port_init();
    port_exit(main());
}

void Default_Handler(void)
{
    port_console_hex("pockmcu: unexpected exception, ICSR", SCB_ICSR);
    port_exit(EXIT_FAULT);
}

void HardFault_Handler(void)
{
    __asm__ volatile("tst lr, #4\n\t"
                     "ite eq\n\t"
                     "mrseq r0, msp\n\t"
                     "mrsne r0, psp\n\t"
                     "mov r1, lr\n\t"
                     "b pockmcu_fault_report\n\t");
}

static int in_range(const uint32_t *p, const uint32_t *lo, const uint32_t *hi) { return p >= lo && p + 8 <= hi; }

void pockmcu_fault_report(const uint32_t *frame, uint32_t exc_return)
{
    uint32_t cfsr = SCB_CFSR;
    uint32_t mmfar = SCB_MMFAR;
    const uint32_t *guard_end = __stack_start + GUARD_BYTES / 4u;
    int overflow = (cfsr & (1u << 20)) != 0u /* STKOF (ARMv8-M) */
        || (cfsr & (1u << 4)) != 0u          /* MSTKERR */
        || ((cfsr & 0x82u) == 0x82u          /* DACCVIOL + MMARVALID */
            && mmfar >= (uint32_t)(uintptr_t)__stack_start && mmfar < (uint32_t)(uintptr_t)guard_end);
    if (overflow)
    {
        port_console_puts("pockmcu: stack overflow: the program needs more than STACK_BYTES of stack\n");
    }
    else
    {
        port_console_puts("pockmcu: fault (bad pointer or misaligned access?)\n");
    }
    port_console_hex("  CFSR ", cfsr);
    port_console_hex("  HFSR ", SCB_HFSR);
    port_console_hex("  MMFAR", mmfar);
    port_console_hex("  BFAR ", SCB_BFAR);
    if (in_range(frame, __stack_start, __stack_top) || in_range(frame, __handler_stack_start, __handler_stack_top))
    {
        port_console_hex("  PC   ", frame[6]);
        port_console_hex("  LR   ", frame[5]);
    }
    port_console_hex("  SP   ", (uint32_t)(uintptr_t)frame);
    port_console_hex("  EXC_RETURN", exc_return);
    port_exit(overflow ? EXIT_STACK_OVERFLOW : EXIT_FAULT);
}

void port_console_hex(const char *label, uint32_t value)
{
    char buf[12];
    static const char digits[] = "0123456789abcdef";
    buf[0] = ' ';
    buf[1] = '0';
    buf[2] = 'x';
    for (int i = 0; i < 8; i++)
    {
        buf[3 + i] = digits[(value >> (28 - 4 * i)) & 0xFu];
    }
    buf[11] = '\0';
    port_console_puts(label);
    port_console_puts(buf);
    port_console_puts("\n");
}

uint32_t port_stack_size(void) { return (uint32_t)((char *)__stack_top - (char *)__stack_start); }

uint32_t port_stack_used(void)
{
#ifdef POCKMCU_V8M
    const volatile uint32_t *p = __stack_start;
#else
    const volatile uint32_t *p = __stack_start + GUARD_BYTES / 4u; /* the guard is not readable */
#endif
    while (p < __stack_top && *p == STACK_PAINT)
    {
        p++;
    }
    return (uint32_t)((const char *)__stack_top - (const volatile char *)p);
}

/* newlib hooks for a -nostartfiles link (no constructors are used). */
void _init(void) {}
void _fini(void) {}

void __assert_func(const char *file, int line, const char *func, const char *expr) __attribute__((noreturn));
void __assert_func(const char *file, int line, const char *func, const char *expr)
{
    port_console_puts("pockmcu: assertion failed: ");
    port_console_puts(expr);
    port_console_puts(" in ");
    port_console_puts(func ? func : "?");
    port_console_puts(" at ");
    port_console_puts(file);
    port_console_hex(" line", (uint32_t)line);
    port_exit(EXIT_ASSERT);
}

void abort(void)
{
    port_console_puts("pockmcu: abort()\n");
    port_exit(EXIT_ABORT);
}
