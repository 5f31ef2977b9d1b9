/*
 * pockmcu_paste_s8 - copy packed int8 rows into a strided region (the inverse
 * of pockmcu_slice_s8; used to write a finished tile into a whole tensor):
 * dst[r][offset .. offset + chunk) = src[r][0 .. chunk) for r < outer, rows of
 * dst_row bytes in dst, chunk bytes in src.
 */
#include <string.h>

#include "pockmcu_nn.h"

void pockmcu_paste_s8(const int8_t *src, int32_t outer, int32_t dst_row, int32_t offset, int32_t chunk, int8_t *dst)
{
    int32_t r;
    for (r = 0; r < outer; r++)
    {
        memcpy(dst + r * dst_row + offset, src + r * chunk, (size_t)chunk);
    }
}
