/*
 * pockmcu host runner (make host-san): pockmcu_run INPUT OUTPUT
 * Reads samples from INPUT (per sample: all inputs' bytes concatenated),
 * invokes the model on each and writes all outputs' bytes per sample to
 * OUTPUT. Exit status 0 on success, 1 on any error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

static int fail(const char *msg, const char *arg)
{
    fprintf(stderr, "pockmcu_run: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
    {
        return fail("usage: pockmcu_run INPUT OUTPUT", NULL);
    }
    if (pockmcu_init() != 0)
    {
        return fail("pockmcu_init failed", NULL);
    }
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
        samples++;
    }
    fclose(fin);
    if (fclose(fout) != 0 && rc == 0)
    {
        rc = fail("write failed", argv[2]);
    }
    return rc;
}
