/*
 * Consistent Overhead Byte Stuffing: a frame of any bytes becomes a run of
 * non-zero bytes, so 0x00 can delimit frames on the wire. Encoding adds one
 * byte per started 254 bytes, plus one.
 */
#ifndef POCKMCU_PROTO_COBS_H
#define POCKMCU_PROTO_COBS_H

#include <stdint.h>

#define PK_COBS_MAX_ENCODED(n) ((n) + (n) / 254u + 1u)

/* Encode len bytes of src, handing every output byte to put(ctx, byte). */
void pk_cobs_emit(const uint8_t *src, uint32_t len, void (*put)(void *ctx, uint8_t b), void *ctx);

/* Decode len encoded bytes (no delimiter) into dst; dst may equal src (in place).
 * Returns the decoded length, or -1 if the input is not valid COBS (a zero
 * byte, or a block that runs past the end). */
int32_t pk_cobs_decode(const uint8_t *src, uint32_t len, uint8_t *dst);

#endif
