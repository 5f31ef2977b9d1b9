#include "frame.h"

#include <string.h>

#include "crc32.h"

uint16_t pk_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

uint32_t pk_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void pk_rx_init(pk_rx *rx)
{
    rx->len = 0;
    rx->overflow = 0;
}

int pk_rx_feed(pk_rx *rx, uint8_t byte, pk_frame *out)
{
    if (byte != 0u)
    {
        if (rx->len < sizeof rx->buf)
        {
            rx->buf[rx->len++] = byte;
        }
        else
        {
            rx->overflow = 1; /* keep discarding until the next delimiter */
        }
        return 0;
    }
    /* a delimiter: whatever came since the last one is a frame */
    uint32_t n = rx->len;
    int overflow = rx->overflow;
    rx->len = 0;
    rx->overflow = 0;
    if (overflow)
    {
        return -PK_ERR_TOO_LONG;
    }
    if (n == 0u)
    {
        return 0; /* empty: back-to-back delimiters */
    }
    int32_t d = pk_cobs_decode(rx->buf, n, rx->buf);
    if (d < 0)
    {
        return -PK_ERR_COBS;
    }
    if ((uint32_t)d > PK_MAX_DECODED)
    {
        return -PK_ERR_TOO_LONG; /* fits the receive buffer, but the payload is over PK_MAX_PAYLOAD */
    }
    if ((uint32_t)d < PK_HEADER_BYTES + PK_CRC_BYTES)
    {
        return -PK_ERR_TOO_SHORT;
    }
    uint32_t body = (uint32_t)d - PK_CRC_BYTES;
    uint32_t crc = pk_get_u32(rx->buf + body);
    if (pk_crc32(0, rx->buf, body) != crc)
    {
        return -PK_ERR_CRC;
    }
    out->type = rx->buf[0];
    out->seq = pk_get_u16(rx->buf + 1);
    out->crc = crc;
    out->payload = rx->buf + PK_HEADER_BYTES;
    out->len = body - PK_HEADER_BYTES;
    return 1;
}

void pk_msg_start(pk_msg *m, uint8_t type, uint16_t seq)
{
    m->buf[0] = type;
    m->buf[1] = (uint8_t)seq;
    m->buf[2] = (uint8_t)(seq >> 8);
    m->len = PK_HEADER_BYTES;
}

uint8_t *pk_msg_reserve(pk_msg *m, uint32_t n)
{
    if (m->len + n > PK_HEADER_BYTES + PK_MAX_PAYLOAD)
    {
        return NULL;
    }
    uint8_t *p = m->buf + m->len;
    m->len += n;
    return p;
}

int pk_msg_put(pk_msg *m, const void *data, uint32_t n)
{
    uint8_t *p = pk_msg_reserve(m, n);
    if (p == NULL)
    {
        return -1;
    }
    if (n)
    {
        memcpy(p, data, n);
    }
    return 0;
}

int pk_msg_u8(pk_msg *m, uint8_t v) { return pk_msg_put(m, &v, 1); }

int pk_msg_u16(pk_msg *m, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return pk_msg_put(m, b, 2);
}

int pk_msg_u32(pk_msg *m, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return pk_msg_put(m, b, 4);
}

int pk_msg_f32(pk_msg *m, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return pk_msg_u32(m, u);
}

void pk_msg_finish(pk_msg *m)
{
    uint32_t crc = pk_crc32(0, m->buf, m->len);
    m->buf[m->len + 0] = (uint8_t)crc;
    m->buf[m->len + 1] = (uint8_t)(crc >> 8);
    m->buf[m->len + 2] = (uint8_t)(crc >> 16);
    m->buf[m->len + 3] = (uint8_t)(crc >> 24);
    m->len += PK_CRC_BYTES;
}

void pk_msg_send(const pk_msg *m, void (*put)(void *ctx, uint8_t b), void *ctx)
{
    put(ctx, 0u);
    pk_cobs_emit(m->buf, m->len, put, ctx);
    put(ctx, 0u);
}
