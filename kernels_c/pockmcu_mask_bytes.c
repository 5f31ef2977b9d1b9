/*
 * pockmcu_mask_bytes - bytes of a 1-bit mask for n elements: (n + 7) / 8.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_mask_bytes(int32_t n) { return (n + 7) / 8; }
