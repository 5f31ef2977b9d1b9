/*
 * Checkpoints: a payload (the trainable parameters and the training
 * counters) kept in flash in two alternating slots so that cutting power at
 * any moment of a save never loses the previous checkpoint.
 *
 * Slot layout (each slot a whole number of erase sectors):
 *   +0     header, 32 bytes: magic "PKCK", version 1, seq, payload bytes,
 *          payload CRC-32, model hash (8 bytes), header CRC-32 (of the 28
 *          bytes before it)
 *   +32    payload, padded with 0xFF to CKPT_UNIT (32) bytes
 *   +32+P  commit record, 32 bytes: magic "PKOK", seq, header CRC-32, ~seq,
 *          then 0xFF
 * A save erases the slot that does NOT hold the newest valid checkpoint,
 * then programs payload, header and, last, the commit record. A slot is
 * valid when its header, its payload CRC and its commit record all check
 * and the model hash matches; the newest valid slot (sequence numbers
 * compared modulo 2^32) is the checkpoint.
 */
#ifndef POCKMCU_PROTO_CHECKPOINT_H
#define POCKMCU_PROTO_CHECKPOINT_H

#include <stdint.h>

#define CKPT_UNIT 32u
#define CKPT_HEADER_BYTES 32u
#define CKPT_COMMIT_BYTES 32u
#define CKPT_MAGIC 0x4B434B50u        /* "PKCK" */
#define CKPT_COMMIT_MAGIC 0x4B4F4B50u /* "PKOK" */
#define CKPT_VERSION 1u
#define CKPT_HASH_BYTES 8u

typedef struct
{
    uint32_t base;       /* address of slot 0; slot 1 follows at base + slot_bytes */
    uint32_t slot_bytes; /* multiple of the erase sector */
} ckpt_layout;

typedef struct
{
    void *ptr; /* restore destination / save source */
    uint32_t len;
} ckpt_seg;

typedef struct
{
    int slot; /* -1: no valid checkpoint */
    uint32_t seq;
    uint32_t payload_len;
} ckpt_info;

/* Bytes a slot needs for a payload of n bytes. */
uint32_t ckpt_slot_need(uint32_t payload_len);

/* The newest valid checkpoint for this model hash (info->slot = -1 if none). */
void ckpt_find(const ckpt_layout *l, const uint8_t hash[CKPT_HASH_BYTES], ckpt_info *info);

/* Save the segments as the next checkpoint. Returns 0 and the new seq/slot,
 * or -1 (payload too large for a slot, flash error). */
int ckpt_save(const ckpt_layout *l,
              const uint8_t hash[CKPT_HASH_BYTES],
              const ckpt_seg *segs,
              int nsegs,
              ckpt_info *saved);

/* Copy the payload of a valid checkpoint (from ckpt_find) into the segments;
 * the segments' total length must equal the payload length. Returns 0 or -1. */
int ckpt_restore(const ckpt_layout *l, const ckpt_info *info, const ckpt_seg *segs, int nsegs);

#endif
