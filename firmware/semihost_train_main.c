/*
 * pockmcu QEMU/debugger app: on-device training over semihosting file I/O
 * (build with APP=semihost_train; needs a model generated with --train).
 *
 * train.bin   header, 7 x uint32 LE: magic "PKTR", version 1, seed, steps,
 *             sample bytes, label bytes, flags (bit 0: time every step);
 *             then per step the input sample followed by its label
 *             (int32 class, or float targets).
 * steps.bin   header, 4 x uint32: magic "PKTS", version 1, timer_hz,
 *             overhead_ticks; then per step: float loss, int32 prediction,
 *             int32 correct, uint32 ticks spent in pockmcu_train_step
 *             (0 unless timed).
 * params.bin  the trainable parameters after the last step
 *             (pockmcu_params_read: the tensors back to back).
 */
#include "app_common.h"
#include "semihost.h"

#ifndef POCKMCU_TRAINING
    #error "semihost_train needs a model generated with pockmcu gen --train"
#endif

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
        fail("cannot open a semihosting file", APP_EXIT_IO);
    }
    return fd;
}

static void read_or_fail(int fd, void *buf, uint32_t len)
{
    if (sh_read(fd, buf, len) != 0)
    {
        fail("train.bin is shorter than its header says", APP_EXIT_IO);
    }
}

static void write_or_fail(int fd, const void *buf, uint32_t len)
{
    if (sh_write(fd, buf, len) != 0)
    {
        fail("semihosting write failed", APP_EXIT_IO);
    }
}

/* Not inlined, so timing an empty call measures exactly the overhead around a step. */
__attribute__((noipa)) static int empty_step(const void *label, pockmcu_step_result *result)
{
    (void)label;
    (void)result;
    return 0;
}

static uint8_t label_buf[POCKMCU_LABEL_BYTES] __attribute__((aligned(4)));

int main(void)
{
    uint32_t header[7];
    int fin = open_or_fail("train.bin", SH_MODE_RB);
    read_or_fail(fin, header, sizeof header);
    if (header[0] != 0x52544B50u || header[1] != 1u || header[4] != pockmcu_input_bytes(0) ||
        header[5] != POCKMCU_LABEL_BYTES)
    {
        fail("train.bin does not match this model", APP_EXIT_IO);
    }
    if (pockmcu_train_init(header[2]) != 0)
    {
        fail("pockmcu_train_init failed", APP_EXIT_INIT);
    }
    int timed = (header[6] & 1u) != 0u;
    uint32_t overhead = 0xFFFFFFFFu;
    for (int i = 0; i < 4 && timed; i++)
    {
        pockmcu_step_result r;
        uint32_t t0 = port_timer_read();
        (void)empty_step(label_buf, &r);
        uint32_t d = port_timer_read() - t0;
        overhead = d < overhead ? d : overhead;
    }
    int fsteps = open_or_fail("steps.bin", SH_MODE_WB);
    uint32_t sh[4] = {0x53544B50u, 1u, port_timer_hz(), timed ? overhead : 0u};
    write_or_fail(fsteps, sh, sizeof sh);

    for (uint32_t s = 0; s < header[3]; s++)
    {
        pockmcu_step_result r;
        uint32_t rec[4];
        read_or_fail(fin, pockmcu_input(0), pockmcu_input_bytes(0));
        read_or_fail(fin, label_buf, sizeof label_buf);
        uint32_t t0 = port_timer_read();
        int rc = pockmcu_train_step(label_buf, &r);
        uint32_t ticks = port_timer_read() - t0;
        if (rc != 0)
        {
            fail("pockmcu_train_step failed (label out of range?)", APP_EXIT_INVOKE);
        }
        __builtin_memcpy(&rec[0], &r.loss, 4);
        rec[1] = (uint32_t)r.prediction;
        rec[2] = (uint32_t)r.correct;
        rec[3] = timed ? ticks : 0u;
        write_or_fail(fsteps, rec, sizeof rec);
    }
    sh_close(fin);
    sh_close(fsteps);

    /* The parameters straight from their RAM arrays, in pockmcu_params_read order (no copy). */
    {
        int fp = open_or_fail("params.bin", SH_MODE_WB);
        for (int k = 0; k < POCKMCU_NUM_TRAINABLE; k++)
        {
            uint32_t bytes = 0;
            const void *p = pockmcu_param_tensor(k, &bytes);
            write_or_fail(fp, p, bytes);
        }
        sh_close(fp);
    }
    return APP_EXIT_OK;
}
