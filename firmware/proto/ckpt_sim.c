/*
 * Host simulation of the checkpoint code over a simulated NOR flash, cut
 * after every byte: the exhaustive power-loss proof (tests/test_board_host.py).
 *
 *   cc -O2 -I.. -o ckpt_sim ckpt_sim.c && ./ckpt_sim
 *
 * For several payload sizes, three models of what an interrupted operation
 * leaves behind (0: the byte being written and the rest of a sector being
 * erased keep their old value; 1: the unreached rest of an interrupted erase
 * is random garbage; 2: as 1, and the byte being programmed is torn: a random
 * subset of the bits it would clear), two starting points (blank flash, and
 * a checkpoint with sequence number 0xFFFFFFFE so the sequence wraps), and a
 * series of saves alternating between the slots: for every save and every
 * cut point c (power lost before the c-th byte erased or programmed,
 * c = 0 .. all bytes), restore what the save saw, cut, "reboot" and check:
 *   - the checkpoint found is the previous one (same seq, same payload) or,
 *     only once its commit record is complete, the new one; never none (when
 *     there was one before), never a damaged or mixed payload;
 *   - an uncut save (c = all bytes) always yields the new one;
 *   - after any cut, the next save succeeds and becomes the newest.
 * Prints one summary line; exit status 0 if every check passed.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_SECTOR 1024u
#define SIM_SECTORS 32u
#define BOARD_FLASH_BASE 0x00081000u
#define BOARD_FLASH_SIZE (SIM_SECTOR * SIM_SECTORS)
#define BOARD_FLASH_SECTOR_BYTES SIM_SECTOR
#define BOARD_FLASH_PROG_BYTES 4u

static unsigned char sim_flash[BOARD_FLASH_SIZE];
static int sim_mode;
static unsigned sim_rng = 12345u;

static unsigned char sim_rand(void)
{
    sim_rng ^= sim_rng << 13;
    sim_rng ^= sim_rng >> 17;
    sim_rng ^= sim_rng << 5;
    return (unsigned char)(sim_rng >> 7);
}

#define BOARD_FLASH_MEM(a) (&sim_flash[(a) - (BOARD_FLASH_BASE)])
#define BOARD_FLASH_ERASE_FILL(a, old) (sim_mode >= 1 ? sim_rand() : (old))
#define BOARD_FLASH_TORN(a, old, new) (sim_mode >= 2 ? ((old) & ((new) | sim_rand())) : (old))

/* clang-format off */
#include "crc32.c"
#include "checkpoint.c"
#include "../board_flash_ram.c"
/* clang-format on */

static jmp_buf cut_jmp;

void board_power_cut(void) { longjmp(cut_jmp, 1); }

static const uint8_t hash[CKPT_HASH_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8};
static uint8_t payload[8][6000];
static uint8_t back[6000];
static unsigned char snapshot[BOARD_FLASH_SIZE];

static long cuts, got_prev, got_new, failures, resaves;

static void fail(const char *what, unsigned size, int mode, int save, long cut)
{
    if (failures < 10)
    {
        fprintf(stderr, "FAIL %s: payload %u, mode %d, save %d, cut %ld\n", what, size, mode, save, cut);
    }
    failures++;
}

/* a save of payload[k] cut after `budget` bytes (-1: not cut); returns 1 if it completed */
static int save_cut(const ckpt_layout *l, int k, uint32_t n, int32_t budget)
{
    ckpt_seg seg = {payload[k], n};
    board_flash_cut_budget = budget;
    if (setjmp(cut_jmp) == 0)
    {
        int rc = ckpt_save(l, hash, &seg, 1, NULL);
        board_flash_cut_budget = -1;
        return rc == 0;
    }
    board_flash_cut_budget = -1;
    return 0;
}

static void run(uint32_t n, int mode, int wrap, int saves)
{
    ckpt_layout l;
    l.slot_bytes = (ckpt_slot_need(n) + SIM_SECTOR - 1u) / SIM_SECTOR * SIM_SECTOR;
    l.base = BOARD_FLASH_BASE + SIM_SECTOR; /* not at the start: offsets are exercised */
    sim_mode = mode;
    memset(sim_flash, 0, sizeof sim_flash); /* QEMU's code memory starts as zeros */
    for (int k = 0; k < 8; k++)
    {
        for (uint32_t i = 0; i < n; i++)
        {
            payload[k][i] = (uint8_t)(sim_rand() ^ (uint8_t)k);
        }
    }
    int prev = -1; /* index of the payload of the newest checkpoint */
    uint32_t prev_seq = 0;
    /* start from a checkpoint with seq 0xFFFFFFFE in slot 0 */
    if (wrap)
    {
        ckpt_seg seg = {payload[7], n};
        if (write_slot(&l, 0, 0xFFFFFFFEu, hash, &seg, 1, n) != 0)
        {
            fail("seed", n, mode, 0, 0);
            return;
        }
        prev = 7;
        prev_seq = 0xFFFFFFFEu;
    }
    for (int s = 0; s < saves; s++)
    {
        memcpy(snapshot, sim_flash, sizeof sim_flash);
        /* count the bytes this save erases and programs */
        board_flash_cut_budget = 0x7FFFFFFF;
        ckpt_seg seg = {payload[s], n};
        if (ckpt_save(&l, hash, &seg, 1, NULL) != 0)
        {
            fail("uncut save failed", n, mode, s, -1);
            return;
        }
        long total = 0x7FFFFFFFL - board_flash_cut_budget;
        board_flash_cut_budget = -1;
        uint32_t new_seq = prev < 0 ? 1u : prev_seq + 1u;
        for (long c = 0; c <= total; c++)
        {
            memcpy(sim_flash, snapshot, sizeof sim_flash);
            int done = save_cut(&l, s, n, (int32_t)c);
            cuts++;
            ckpt_info info;
            ckpt_find(&l, hash, &info); /* the reboot */
            if (c == total && !done)
            {
                fail("uncut save did not complete", n, mode, s, c);
            }
            if (info.slot < 0)
            {
                if (prev >= 0)
                {
                    fail("previous checkpoint lost", n, mode, s, c);
                }
                continue;
            }
            ckpt_seg rb = {back, n};
            if (ckpt_restore(&l, &info, &rb, 1) != 0)
            {
                fail("restore failed", n, mode, s, c);
                continue;
            }
            if (info.seq == new_seq && memcmp(back, payload[s], n) == 0)
            {
                got_new++;
            }
            else if (prev >= 0 && info.seq == prev_seq && memcmp(back, payload[prev], n) == 0)
            {
                got_prev++;
                if (c == total)
                {
                    fail("completed save not restored", n, mode, s, c);
                }
            }
            else
            {
                fail("restored a checkpoint that is neither the previous nor the new one", n, mode, s, c);
            }
            /* the device goes on: the next save must work */
            if (c % 31 == 0)
            {
                uint32_t after = info.seq + 1u;
                if (!save_cut(&l, 6, n, -1))
                {
                    fail("save after a cut failed", n, mode, s, c);
                }
                else
                {
                    ckpt_info again;
                    ckpt_find(&l, hash, &again);
                    ckpt_seg rb2 = {back, n};
                    if (again.seq != after || ckpt_restore(&l, &again, &rb2, 1) != 0 ||
                        memcmp(back, payload[6], n) != 0)
                    {
                        fail("save after a cut is not the newest", n, mode, s, c);
                    }
                    resaves++;
                }
            }
        }
        memcpy(sim_flash, snapshot, sizeof sim_flash);
        if (!save_cut(&l, s, n, -1))
        {
            fail("save failed", n, mode, s, -1);
            return;
        }
        prev = s;
        prev_seq = new_seq;
    }
}

int main(void)
{
    static const uint32_t sizes[] = {2696u, 100u, 1500u};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
        for (int mode = 0; mode < 3; mode++)
        {
            run(sizes[i], mode, 0, 3);
            run(sizes[i], mode, 1, 2);
        }
    }
    printf("CKPT_SIM cuts=%ld restored_previous=%ld restored_new=%ld resaves=%ld failures=%ld\n",
           cuts,
           got_prev,
           got_new,
           resaves,
           failures);
    return failures ? 1 : 0;
}
