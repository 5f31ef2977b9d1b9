/*
 * The board runtime compiled for the host (fuzzing, tests/test_board_host.py,
 * and a fast device over a socket: pockmcu/board/emulate.py HostBoard): the
 * same protocol handler, checkpoint code and flash driver as on the device,
 * with the generated model, a simulated flash and stdin/stdout as the UART.
 * Handles stdin as it arrives (whatever read() returns), flushing the
 * responses after each piece, until end of input. RESET and BOOTLOADER
 * requests and power cuts (SAVE with a cut budget) reboot: the RAM state is
 * re-initialised, the simulated flash (and the checkpoints in it) stays.
 *
 * Build (pockmcu/board/firmware.py build_host_harness): cc -I<dir with a
 * host board_config.h> -IOUT -IOUT/kernels -IOUT/firmware OUT/model.c
 * OUT/weights.c OUT/kernels/(all .c) OUT/firmware/proto/host_harness.c -lm
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "board_config.h"

static unsigned char sim_flash[BOARD_FLASH_SIZE];
#define BOARD_FLASH_MEM(a) (&sim_flash[(uint32_t)(a) - (BOARD_FLASH_BASE)])

/* The runtime, one translation unit: each file uses those above it. */
/* clang-format off */
#include "crc32.c"
#include "cobs.c"
#include "frame.c"
#include "checkpoint.c"
#include "board_app.c"
#include "../board_flash_ram.c"
/* clang-format on */

static jmp_buf reboot;
static unsigned long reboots, cuts;

void board_power_cut(void)
{
    cuts++;
    longjmp(reboot, 1);
}

void board_putc(uint8_t b) { putchar(b); }

uint32_t board_uptime_ms(void) { return 0; }

void board_memory_use(uint32_t *ram_used, uint32_t *stack_used, uint32_t *flash_used)
{
    *ram_used = 0;
    *stack_used = 0;
    *flash_used = 0;
}

int board_can_enter_bootloader(void) { return 1; }

static unsigned char data[1u << 16];
static size_t len, pos;
static unsigned long total;

int main(void)
{
    memset(sim_flash, 0, sizeof sim_flash);
    if (setjmp(reboot) != 0)
    {
        reboots++;
        board_flash_cut_budget = -1;
    }
    board_app_init();
    for (;;)
    {
        while (pos < len)
        {
            int act = board_app_byte(data[pos++]);
            if (act != BOARD_ACT_NONE)
            {
                fflush(stdout);
                longjmp(reboot, 1);
            }
        }
        fflush(stdout);
        ssize_t n = read(0, data, sizeof data);
        if (n <= 0)
        {
            break;
        }
        len = (size_t)n;
        pos = 0;
        total += (unsigned long)n;
    }
    fprintf(stderr, "HARNESS bytes=%lu reboots=%lu cuts=%lu\n", total, reboots, cuts);
    return 0;
}
