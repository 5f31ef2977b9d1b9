/*
 * pockmcu host runner (make host-san): pockmcu_run INPUT OUTPUT
 * Reads samples from INPUT (per sample: all inputs' bytes concatenated),
 * invokes the model on each and writes all outputs' bytes per sample to
 * OUTPUT. Exit status 0 on success, 1 on any error (message on stderr).
 *
 * The checked build of a --train model (make host-check: POCKMCU_CHECKED and POCKMCU_TRAINING) also
 * trains: pockmcu_run INPUT OUTPUT [LABELS] runs, after each sample's inference, one
 * pockmcu_train_step on that sample with the next POCKMCU_LABEL_BYTES of LABELS (without LABELS: a
 * zero label, class 0 or all-zero targets), so the bounds assertions of every training step run too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#if defined(POCKMCU_CHECKED) && defined(POCKMCU_TRAINING)
    #define HOST_TRAIN 1
#else
    #define HOST_TRAIN 0
#endif

static int fail(const char *msg, const char *arg)
{
    fprintf(stderr, "pockmcu_run: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

int main(int argc, char **argv)
{
#if HOST_TRAIN
    static unsigned char label[POCKMCU_LABEL_BYTES];
    static unsigned char sample0[POCKMCU_INPUT0_BYTES];
    FILE *flabels = NULL;
    if (argc != 3 && argc != 4)
    {
        return fail("usage: pockmcu_run INPUT OUTPUT [LABELS]", NULL);
    }
    if (pockmcu_train_init(1u) != 0)
    {
        return fail("pockmcu_train_init failed", NULL);
    }
    if (argc == 4 && (flabels = fopen(argv[3], "rb")) == NULL)
    {
        return fail("cannot open labels", argv[3]);
    }
#else
    if (argc != 3)
    {
        return fail("usage: pockmcu_run INPUT OUTPUT", NULL);
    }
    if (pockmcu_init() != 0)
    {
        return fail("pockmcu_init failed", NULL);
    }
#endif
    FILE *fin = fopen(argv[1], "rb");
    if (fin == NULL)
    {
        return fail("cannot open input", argv[1]);
    }
    FILE *fout = fopen(argv[2], "wb");
    if (fout == NULL)
    {
        fclose(fin);
        return fail("cannot create output", argv[2]);
    }
    int rc = 0;
    unsigned long samples = 0;
    for (;;)
    {
        int i, eof = 0;
        for (i = 0; i < POCKMCU_NUM_INPUTS; i++)
        {
            size_t n = pockmcu_input_bytes(i);
            size_t got = fread(pockmcu_input(i), 1, n, fin);
            if (got == 0 && i == 0 && feof(fin))
            {
                eof = 1;
                break;
            }
            if (got != n)
            {
                rc = fail("input ends inside a sample", argv[1]);
                break;
            }
        }
        if (eof || rc != 0)
        {
            break;
        }
#if HOST_TRAIN
        memcpy(sample0, pockmcu_input(0), pockmcu_input_bytes(0)); /* inference may reuse its bytes */
#endif
        if (pockmcu_invoke() != 0)
        {
            fprintf(stderr, "pockmcu_run: pockmcu_invoke failed on sample %lu\n", samples);
            rc = 1;
            break;
        }
        for (i = 0; i < POCKMCU_NUM_OUTPUTS; i++)
        {
            size_t n = pockmcu_output_bytes(i);
            if (fwrite(pockmcu_output(i), 1, n, fout) != n)
            {
                rc = fail("write failed", argv[2]);
                break;
            }
        }
        if (rc != 0)
        {
            break;
        }
#if HOST_TRAIN
        {
            pockmcu_step_result res;
            memset(label, 0, sizeof label);
            if (flabels != NULL && fread(label, 1, sizeof label, flabels) != sizeof label)
            {
                rc = fail("labels end before the samples", argv[3]);
                break;
            }
            memcpy(pockmcu_input(0), sample0, pockmcu_input_bytes(0));
            if (pockmcu_train_step(label, &res) != 0)
            {
                fprintf(stderr, "pockmcu_run: pockmcu_train_step failed on sample %lu\n", samples);
                rc = 1;
                break;
            }
        }
#endif
        samples++;
    }
#if HOST_TRAIN
    if (flabels != NULL)
    {
        fclose(flabels);
    }
#endif
    fclose(fin);
    if (fclose(fout) != 0 && rc == 0)
    {
        rc = fail("write failed", argv[2]);
    }
    return rc;
}
