/*
 * pockmcu_xorshift32 - Marsaglia's xorshift32 generator (13, 17, 5).
 *
 * x ^= x << 13; x ^= x >> 17; x ^= x << 5; the new x is stored in *state and
 * returned. Pure uint32_t arithmetic: bit-identical on every target. The
 * state must be nonzero (zero is a fixed point).
 */
#include "pockmcu_nn.h"

uint32_t pockmcu_xorshift32(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}
