/*
 * pockmcu_profile_hook for the firmware apps (compiled only with
 * -DPOCKMCU_PROFILE): one timer reading per call into pockmcu_profile_ticks.
 *
 * The hook is `noipa` (not inlined, cloned or specialised), so a call costs
 * the same instructions from model.c and from the calibration below; the
 * calibration's hook(0); hook(1); pair is exactly the overhead that sits
 * between two readings around an op.
 */
#include "app_common.h"

#ifdef POCKMCU_PROFILE

uint32_t pockmcu_profile_ticks[POCKMCU_NUM_OPS + 1];

__attribute__((noipa)) void pockmcu_profile_hook(int op_index)
{
    uint32_t t = port_timer_read();
    if ((unsigned)op_index <= (unsigned)POCKMCU_NUM_OPS)
    {
        pockmcu_profile_ticks[op_index] = t;
    }
}

uint32_t pockmcu_profile_overhead(void)
{
    uint32_t best = 0xFFFFFFFFu;
    for (int i = 0; i < 4; i++)
    {
        pockmcu_profile_hook(0);
        pockmcu_profile_hook(1);
        uint32_t d = pockmcu_profile_ticks[1] - pockmcu_profile_ticks[0];
        if (d < best)
        {
            best = d;
        }
    }
    return best;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int pockmcu_profile_hook_unused;
#endif
