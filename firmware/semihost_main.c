/*
 * pockmcu QEMU/debugger app: batch inference over semihosting file I/O.
 *
 * Files (relative to QEMU's working directory):
 *   input.bin    samples back to back; one sample = input 0 bytes, input 1
 *                bytes, ... (pockmcu_input_bytes(i) each). EOF at a sample
 *                boundary ends the run; a partial sample is an error (exit 2).
 *   output.bin   per sample: output 0 bytes, output 1 bytes, ...
 *   stats.bin    at the end, 5 x uint32 LE: magic "PKST", version 1, samples,
 *                stack high-water bytes, stack size bytes.
 *   profile.bin  (only with -DPOCKMCU_PROFILE), all uint32 little-endian:
 *                header, 6 words: magic "PKPF" (0x46504B50), version 1,
 *                  num_ops, timer_hz, overhead_ticks (an empty measured
 *                  region: hook(0) then hook(1)), 0 (reserved)
 *                then per sample num_ops + 1 words: the up-counting timer
 *                  reading at the start of op 0 .. op num_ops-1 and after the
 *                  last op (mod 2^32). Op i took
 *                  (t[i+1] - t[i]) mod 2^32 - overhead_ticks ticks.
 * Exit status: see app_common.h.
 */
#include "app_common.h"
#include "semihost.h"

static void fail(const char *msg, int status) __attribute__((noreturn));
static void fail(const char *msg, int status)
{
    port_console_puts("pockmcu: ");
    port_console_puts(msg);
    port_console_puts("\n");
    port_exit(status);
}

static int open_or_fail(const char *name, int mode)
{
    int fd = sh_open(name, mode);
    if (fd < 0)
    {
        port_console_puts("pockmcu: cannot open ");
        port_console_puts(name);
        port_console_puts("\n");
        port_exit(APP_EXIT_IO);
    }
    return fd;
}

static void write_or_fail(int fd, const void *buf, uint32_t len)
{
    if (sh_write(fd, buf, len) != 0)
    {
        fail("semihosting write failed", APP_EXIT_IO);
    }
}

int main(void)
{
    if (pockmcu_init() != 0)
    {
        fail("pockmcu_init failed", APP_EXIT_INIT);
    }
    int fin = open_or_fail("input.bin", SH_MODE_RB);
    int fout = open_or_fail("output.bin", SH_MODE_WB);
#ifdef POCKMCU_PROFILE
    int fprof = open_or_fail("profile.bin", SH_MODE_WB);
    {
        uint32_t header[6];
        header[0] = 0x46504B50u; /* "PKPF" */
        header[1] = 1u;
        header[2] = (uint32_t)POCKMCU_NUM_OPS;
        header[3] = port_timer_hz();
        header[4] = pockmcu_profile_overhead();
        header[5] = 0u;
        write_or_fail(fprof, header, sizeof header);
    }
#endif

    uint32_t samples = 0;
    for (;;)
    {
        int i;
        for (i = 0; i < POCKMCU_NUM_INPUTS; i++)
        {
            uint32_t n = pockmcu_input_bytes(i);
            int left = sh_read(fin, pockmcu_input(i), n);
            if (left == (int)n && i == 0)
            {
                break; /* clean end of file */
            }
            if (left != 0)
            {
                fail("input.bin ends inside a sample", APP_EXIT_IO);
            }
        }
        if (i == 0 && POCKMCU_NUM_INPUTS > 0)
        {
            break;
        }
        if (pockmcu_invoke() != 0)
        {
            fail("pockmcu_invoke failed", APP_EXIT_INVOKE);
        }
        for (i = 0; i < POCKMCU_NUM_OUTPUTS; i++)
        {
            write_or_fail(fout, pockmcu_output(i), pockmcu_output_bytes(i));
        }
#ifdef POCKMCU_PROFILE
        write_or_fail(fprof, pockmcu_profile_ticks, sizeof pockmcu_profile_ticks);
#endif
        samples++;
    }

    sh_close(fin);
    sh_close(fout);
#ifdef POCKMCU_PROFILE
    sh_close(fprof);
#endif
    {
        uint32_t stats[5];
        stats[0] = 0x54534B50u; /* "PKST" */
        stats[1] = 1u;
        stats[2] = samples;
        stats[3] = port_stack_used();
        stats[4] = port_stack_size();
        int fstats = open_or_fail("stats.bin", SH_MODE_WB);
        write_or_fail(fstats, stats, sizeof stats);
        sh_close(fstats);
    }
    return APP_EXIT_OK;
}
