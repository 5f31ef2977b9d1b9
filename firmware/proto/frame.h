/*
 * pockmcu board protocol, framing layer (see firmware/PROTOCOL.md).
 *
 * A frame on the wire:   0x00  COBS(type | seq | payload | crc32)  0x00
 *   type     u8      request type, response = request | 0x80, 0x7F = error
 *   seq      u16 LE  chosen by the host; a response carries its request's seq
 *   payload  0..PK_MAX_PAYLOAD bytes
 *   crc32    u32 LE  CRC-32 (zlib.crc32) of type, seq and payload
 * Zero-length frames (two delimiters in a row) are ignored.
 */
#ifndef POCKMCU_PROTO_FRAME_H
#define POCKMCU_PROTO_FRAME_H

#include <stdint.h>

#include "cobs.h"

/* The one frame-size limit: firmware/PROTOCOL.md states it, pockmcu/board/protocol.py has the same
 * numbers (tests/test_serial_protocol.py checks that the three agree). */
#define PK_MAX_PAYLOAD 1024u
#define PK_HEADER_BYTES 3u
#define PK_CRC_BYTES 4u
#define PK_MAX_DECODED (PK_HEADER_BYTES + PK_MAX_PAYLOAD + PK_CRC_BYTES)
#define PK_MAX_ENCODED PK_COBS_MAX_ENCODED(PK_MAX_DECODED)
#define PK_SEQ_NONE 0xFFFFu /* seq of error frames about frames too damaged to read */

/* frame-level errors (also the first payload byte of the error frame) */
#define PK_ERR_CRC 1  /* CRC-32 mismatch */
#define PK_ERR_COBS 2 /* not valid COBS */
#define PK_ERR_TOO_LONG                                                                                                \
    3 /* more than PK_MAX_ENCODED bytes before a delimiter, or decodes to more than PK_MAX_DECODED */
#define PK_ERR_TOO_SHORT 4 /* decoded to fewer than 7 bytes */

typedef struct
{
    uint8_t type;
    uint16_t seq;
    uint32_t crc; /* the frame's CRC (identifies a repeated request) */
    const uint8_t *payload;
    uint32_t len;
} pk_frame;

typedef struct
{
    uint8_t buf[PK_MAX_ENCODED];
    uint32_t len;
    uint8_t overflow;
} pk_rx;

void pk_rx_init(pk_rx *rx);

/* Feed one received byte. Returns 0 while no frame is complete, 1 when *out
 * holds a good frame (valid until the next call), or -PK_ERR_* for a bad one. */
int pk_rx_feed(pk_rx *rx, uint8_t byte, pk_frame *out);

/* A message being built: the decoded frame, header first (crc appended by pk_msg_finish). */
typedef struct
{
    uint8_t buf[PK_MAX_DECODED];
    uint32_t len; /* header + payload so far; + 4 after finish */
} pk_msg;

void pk_msg_start(pk_msg *m, uint8_t type, uint16_t seq);
/* Append bytes; returns 0, or -1 if the payload would exceed PK_MAX_PAYLOAD (nothing appended). */
int pk_msg_put(pk_msg *m, const void *data, uint32_t n);
int pk_msg_u8(pk_msg *m, uint8_t v);
int pk_msg_u16(pk_msg *m, uint16_t v);
int pk_msg_u32(pk_msg *m, uint32_t v);
int pk_msg_f32(pk_msg *m, float v);
uint8_t *pk_msg_reserve(pk_msg *m, uint32_t n); /* room for n payload bytes, or NULL */
void pk_msg_finish(pk_msg *m);
/* Send a finished message: 0x00, COBS, 0x00. */
void pk_msg_send(const pk_msg *m, void (*put)(void *ctx, uint8_t b), void *ctx);

uint16_t pk_get_u16(const uint8_t *p);
uint32_t pk_get_u32(const uint8_t *p);

#endif
