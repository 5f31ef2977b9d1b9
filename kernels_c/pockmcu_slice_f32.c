/*
 * pockmcu_slice_f32 - copy a channel range out of float32 rows:
 * dst[r][0 .. chunk) = src[r][offset .. offset + chunk) for r < outer, rows of
 * src_row floats in src, chunk floats in dst.
 */
#include <string.h>

#include "pockmcu_nn.h"

void pockmcu_slice_f32(const float *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, float *dst)
{
    int32_t r;
    for (r = 0; r < outer; r++)
    {
        memcpy(dst + r * chunk, src + r * src_row + offset, (size_t)chunk * sizeof(float));
    }
}
