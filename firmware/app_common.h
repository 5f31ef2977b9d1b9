/*
 * Shared by the firmware apps (semihost_main.c, board_main.c, ...): exit statuses
 * and the profiling hook.
 *
 * Exit statuses (QEMU's exit status under semihosting):
 *   0 ok, 1 pockmcu_init failed, 2 host I/O error (missing input.bin,
 *   truncated sample, failed write), 3 pockmcu_invoke failed,
 *   4 assert, 5 fault (HardFault etc., details on the console), 6 abort,
 *   7 stack overflow (the thread stack hit its guard or PSPLIM).
 */
#ifndef POCKMCU_APP_COMMON_H
#define POCKMCU_APP_COMMON_H

#include <stdint.h>

#include "model.h"
#include "port.h"

#define APP_EXIT_OK 0
#define APP_EXIT_INIT 1
#define APP_EXIT_IO 2
#define APP_EXIT_INVOKE 3

#ifdef POCKMCU_PROFILE
/* Timer readings taken by pockmcu_profile_hook(i) at the start of op i;
 * entry NUM_OPS is taken after the last op. */
extern uint32_t pockmcu_profile_ticks[POCKMCU_NUM_OPS + 1];

/* Ticks of an empty measured region: hook(0) immediately followed by hook(1),
 * i.e. everything a hook call adds between two readings. The minimum of a
 * few runs (identical under QEMU icount). */
uint32_t pockmcu_profile_overhead(void);
#endif

#endif
