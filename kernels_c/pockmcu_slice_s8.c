/*
 * pockmcu_slice_s8 - copy a channel range out of int8 rows (used to save the
 * trainable input channels of an activation for the weight gradient):
 * dst[r][0 .. chunk) = src[r][offset .. offset + chunk) for r < outer, rows of
 * src_row bytes in src, chunk bytes in dst.
 */
#include <string.h>

#include "pockmcu_nn.h"

void pockmcu_slice_s8(const int8_t *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, int8_t *dst)
{
    int32_t r;
    for (r = 0; r < outer; r++)
    {
        memcpy(dst + r * chunk, src + r * src_row + offset, (size_t)chunk);
    }
}
