/*
 * pockmcu QEMU app: training steps with a timer reading before every step of
 * the training schedule (pockmcu bench --train; pockmcu/train_bench.py).
 *
 * Build with APP=semihost_train_profile and -DPOCKMCU_PROFILE_TRAIN (model.c
 * then calls pockmcu_profile_hook(k) before step k of POCKMCU_TRAIN_OPS and
 * once more with POCKMCU_TRAIN_OPS after the last one); run under
 * -icount shift=8 for exact instruction counts.
 *
 * train.bin   as for semihost_train_main.c (header "PKTR" version 1, then per
 *             step the input sample and its label).
 * profile.bin the layout of semihost_main.c's (uint32 LE): b"PKPF", version 1,
 *             POCKMCU_TRAIN_OPS, timer_hz, overhead_ticks, 0; then per
 *             training step POCKMCU_TRAIN_OPS + 1 timer readings.
 * steps.bin   per step: float loss, int32 prediction.
 * params.bin  the trainable parameters after the last step.
 */
#include "app_common.h"
#include "semihost.h"

#ifndef POCKMCU_TRAINING
    #error "semihost_train_profile needs a model generated with pockmcu gen --train"
#endif
#ifndef POCKMCU_PROFILE_TRAIN
    #error "semihost_train_profile needs -DPOCKMCU_PROFILE_TRAIN"
#endif

static uint32_t ticks[POCKMCU_TRAIN_OPS + 1];

/* noipa: a call costs the same from model.c and from the calibration below. */
__attribute__((noipa)) void pockmcu_profile_hook(int op_index)
{
    uint32_t t = port_timer_read();
    if ((unsigned)op_index <= (unsigned)POCKMCU_TRAIN_OPS)
    {
        ticks[op_index] = t;
    }
}

static uint32_t overhead_ticks(void)
{
    uint32_t best = 0xFFFFFFFFu;
    for (int i = 0; i < 4; i++)
    {
        pockmcu_profile_hook(0);
        pockmcu_profile_hook(1);
        uint32_t d = ticks[1] - ticks[0];
        best = d < best ? d : best;
    }
    return best;
}

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
    int fprof = open_or_fail("profile.bin", SH_MODE_WB);
    int fsteps = open_or_fail("steps.bin", SH_MODE_WB);
    {
        uint32_t ph[6] = {0x46504B50u, 1u, (uint32_t)POCKMCU_TRAIN_OPS, port_timer_hz(), overhead_ticks(), 0u};
        write_or_fail(fprof, ph, sizeof ph);
    }
    for (uint32_t s = 0; s < header[3]; s++)
    {
        pockmcu_step_result r;
        uint32_t rec[2];
        read_or_fail(fin, pockmcu_input(0), pockmcu_input_bytes(0));
        read_or_fail(fin, label_buf, sizeof label_buf);
        if (pockmcu_train_step(label_buf, &r) != 0)
        {
            fail("pockmcu_train_step failed (label out of range?)", APP_EXIT_INVOKE);
        }
        write_or_fail(fprof, ticks, sizeof ticks);
        __builtin_memcpy(&rec[0], &r.loss, 4);
        rec[1] = (uint32_t)r.prediction;
        write_or_fail(fsteps, rec, sizeof rec);
    }
    sh_close(fin);
    sh_close(fprof);
    sh_close(fsteps);
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
