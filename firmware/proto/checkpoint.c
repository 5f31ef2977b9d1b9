#include "checkpoint.h"

#include <string.h>

#include "board_flash.h"
#include "crc32.h"

static uint32_t align_up(uint32_t n, uint32_t a) { return (n + a - 1u) / a * a; }

uint32_t ckpt_slot_need(uint32_t payload_len)
{
    return CKPT_HEADER_BYTES + align_up(payload_len, CKPT_UNIT) + CKPT_COMMIT_BYTES;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* CRC-32 of len bytes of flash, read in small pieces. */
static uint32_t flash_crc(uint32_t addr, uint32_t len)
{
    uint8_t buf[64];
    uint32_t crc = 0;
    while (len)
    {
        uint32_t n = len < sizeof buf ? len : (uint32_t)sizeof buf;
        board_flash_read(addr, buf, n);
        crc = pk_crc32(crc, buf, n);
        addr += n;
        len -= n;
    }
    return crc;
}

/* Returns 1 and fills seq/len if slot k holds a complete checkpoint for this hash. */
static int slot_valid(const ckpt_layout *l, int k, const uint8_t hash[CKPT_HASH_BYTES], uint32_t *seq, uint32_t *len)
{
    uint32_t base = l->base + (uint32_t)k * l->slot_bytes;
    uint8_t h[CKPT_HEADER_BYTES], c[CKPT_COMMIT_BYTES];
    board_flash_read(base, h, sizeof h);
    if (get32(h) != CKPT_MAGIC || get32(h + 4) != CKPT_VERSION)
    {
        return 0;
    }
    uint32_t hcrc = get32(h + 28);
    if (pk_crc32(0, h, 28) != hcrc)
    {
        return 0;
    }
    uint32_t s = get32(h + 8), n = get32(h + 12), pcrc = get32(h + 16);
    if (n > l->slot_bytes || ckpt_slot_need(n) > l->slot_bytes)
    {
        return 0;
    }
    if (memcmp(h + 20, hash, CKPT_HASH_BYTES) != 0)
    {
        return 0;
    }
    board_flash_read(base + CKPT_HEADER_BYTES + align_up(n, CKPT_UNIT), c, sizeof c);
    if (get32(c) != CKPT_COMMIT_MAGIC || get32(c + 4) != s || get32(c + 8) != hcrc || get32(c + 12) != ~s)
    {
        return 0;
    }
    if (flash_crc(base + CKPT_HEADER_BYTES, n) != pcrc)
    {
        return 0;
    }
    *seq = s;
    *len = n;
    return 1;
}

void ckpt_find(const ckpt_layout *l, const uint8_t hash[CKPT_HASH_BYTES], ckpt_info *info)
{
    info->slot = -1;
    info->seq = 0;
    info->payload_len = 0;
    for (int k = 0; k < 2; k++)
    {
        uint32_t seq, len;
        if (slot_valid(l, k, hash, &seq, &len))
        {
            if (info->slot < 0 || (int32_t)(seq - info->seq) > 0)
            {
                info->slot = k;
                info->seq = seq;
                info->payload_len = len;
            }
        }
    }
}

/* Streams segments into CKPT_UNIT-sized program operations. */
typedef struct
{
    uint8_t block[CKPT_UNIT];
    uint32_t fill;
    uint32_t addr;
    uint32_t crc;
    int err;
} ckpt_writer;

static void writer_flush(ckpt_writer *w)
{
    if (w->fill == 0u)
    {
        return;
    }
    memset(w->block + w->fill, 0xFF, CKPT_UNIT - w->fill);
    if (board_flash_program(w->addr, w->block, CKPT_UNIT) != 0)
    {
        w->err = 1;
    }
    w->addr += CKPT_UNIT;
    w->fill = 0;
}

static void writer_put(ckpt_writer *w, const uint8_t *p, uint32_t n)
{
    w->crc = pk_crc32(w->crc, p, n);
    while (n)
    {
        uint32_t k = CKPT_UNIT - w->fill;
        if (k > n)
        {
            k = n;
        }
        memcpy(w->block + w->fill, p, k);
        w->fill += k;
        p += k;
        n -= k;
        if (w->fill == CKPT_UNIT)
        {
            writer_flush(w);
        }
    }
}

/* Write a complete checkpoint with sequence number seq into slot k: erase,
 * payload, header, and last the commit record. */
static int write_slot(const ckpt_layout *l,
                      int k,
                      uint32_t seq,
                      const uint8_t hash[CKPT_HASH_BYTES],
                      const ckpt_seg *segs,
                      int nsegs,
                      uint32_t n)
{
    uint32_t base = l->base + (uint32_t)k * l->slot_bytes;
    if (board_flash_erase(base, l->slot_bytes) != 0)
    {
        return -1;
    }
    ckpt_writer w;
    w.fill = 0;
    w.addr = base + CKPT_HEADER_BYTES;
    w.crc = 0;
    w.err = 0;
    for (int i = 0; i < nsegs; i++)
    {
        writer_put(&w, (const uint8_t *)segs[i].ptr, segs[i].len);
    }
    writer_flush(&w);
    if (w.err)
    {
        return -1;
    }

    uint8_t h[CKPT_HEADER_BYTES];
    put32(h, CKPT_MAGIC);
    put32(h + 4, CKPT_VERSION);
    put32(h + 8, seq);
    put32(h + 12, n);
    put32(h + 16, w.crc);
    memcpy(h + 20, hash, CKPT_HASH_BYTES);
    uint32_t hcrc = pk_crc32(0, h, 28);
    put32(h + 28, hcrc);
    if (board_flash_program(base, h, sizeof h) != 0)
    {
        return -1;
    }

    uint8_t c[CKPT_COMMIT_BYTES];
    memset(c, 0xFF, sizeof c);
    put32(c, CKPT_COMMIT_MAGIC);
    put32(c + 4, seq);
    put32(c + 8, hcrc);
    put32(c + 12, ~seq);
    return board_flash_program(base + CKPT_HEADER_BYTES + align_up(n, CKPT_UNIT), c, sizeof c);
}

int ckpt_save(const ckpt_layout *l,
              const uint8_t hash[CKPT_HASH_BYTES],
              const ckpt_seg *segs,
              int nsegs,
              ckpt_info *saved)
{
    uint32_t n = 0;
    for (int i = 0; i < nsegs; i++)
    {
        n += segs[i].len;
    }
    if (ckpt_slot_need(n) > l->slot_bytes)
    {
        return -1;
    }
    ckpt_info cur;
    ckpt_find(l, hash, &cur);
    int k = cur.slot == 0 ? 1 : 0; /* never touch the newest valid slot */
    uint32_t seq = cur.slot < 0 ? 1u : cur.seq + 1u;
    if (write_slot(l, k, seq, hash, segs, nsegs, n) != 0)
    {
        return -1;
    }
    /* read back: the commit must now make the slot the newest valid one */
    ckpt_info now;
    ckpt_find(l, hash, &now);
    if (now.slot != k || now.seq != seq)
    {
        return -1;
    }
    if (saved)
    {
        *saved = now;
    }
    return 0;
}

int ckpt_restore(const ckpt_layout *l, const ckpt_info *info, const ckpt_seg *segs, int nsegs)
{
    if (info->slot < 0)
    {
        return -1;
    }
    uint32_t total = 0;
    for (int i = 0; i < nsegs; i++)
    {
        total += segs[i].len;
    }
    if (total != info->payload_len)
    {
        return -1;
    }
    uint32_t addr = l->base + (uint32_t)info->slot * l->slot_bytes + CKPT_HEADER_BYTES;
    for (int i = 0; i < nsegs; i++)
    {
        board_flash_read(addr, segs[i].ptr, segs[i].len);
        addr += segs[i].len;
    }
    return 0;
}
