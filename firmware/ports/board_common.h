/*
 * Helpers shared by the real-board ports (not used on QEMU, where DWT_CYCCNT
 * reads 0): the DWT cycle counter as the profiling timer, Cortex-M7 caches,
 * and the park-the-core exit.
 */
#ifndef POCKMCU_BOARD_COMMON_H
#define POCKMCU_BOARD_COMMON_H

#include <stdint.h>

#define BC_REG(addr) (*(volatile uint32_t *)(addr))

#define BC_DEMCR BC_REG(0xE000EDFCu)
#define BC_DWT_CTRL BC_REG(0xE0001000u)
#define BC_DWT_CYCCNT BC_REG(0xE0001004u)
#define BC_DWT_LAR BC_REG(0xE0001FB0u)

/* Start the DWT cycle counter (counts core clock cycles, 32 bits). */
static inline void bc_dwt_start(void)
{
    BC_DEMCR |= 1u << 24;     /* TRCENA */
    BC_DWT_LAR = 0xC5ACCE55u; /* unlock (Cortex-M7); write-ignored elsewhere */
    BC_DWT_CYCCNT = 0u;
    BC_DWT_CTRL |= 1u; /* CYCCNTENA */
}

static inline uint32_t bc_dwt_read(void) { return BC_DWT_CYCCNT; }

/* Cortex-M7 L1 caches (the sequence of CMSIS SCB_EnableICache/DCache). */
static inline void bc_m7_enable_caches(void)
{
    const uint32_t ccr = 0xE000ED14u;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    BC_REG(0xE000EF50u) = 0u; /* ICIALLU */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    BC_REG(ccr) |= 1u << 17; /* IC */
    __asm__ volatile("dsb\n\tisb" ::: "memory");

    BC_REG(0xE000ED84u) = 0u; /* CSSELR: L1 data */
    __asm__ volatile("dsb" ::: "memory");
    uint32_t ccsidr = BC_REG(0xE000ED80u);
    uint32_t sets = (ccsidr >> 13) & 0x7FFFu;
    do
    {
        uint32_t ways = (ccsidr >> 3) & 0x3FFu;
        do
        {
            BC_REG(0xE000EF60u) = ((sets << 5) & 0x3FE0u) | ((ways << 30) & 0xC0000000u); /* DCISW */
        } while (ways-- != 0u);
    } while (sets-- != 0u);
    __asm__ volatile("dsb" ::: "memory");
    BC_REG(ccr) |= 1u << 16; /* DC */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

static inline void bc_park(void)
{
    for (;;)
    {
        __asm__ volatile("wfi");
    }
}

#endif
