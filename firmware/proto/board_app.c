/*
 * Board protocol handler. Exactly-once: every single-frame request that
 * changes the device (all but INFO, STATS, READ_PARAMS, PING, PROFILE,
 * READ_OUTPUT and the XFER_* requests) is remembered by its seq, type and CRC
 * together with the response it got; the same request again (a
 * retransmission) gets the remembered response and is not applied again.
 * Chunked transfers (XFER_BEGIN / XFER_CHUNK / XFER_COMMIT) carry a transfer
 * id: chunks are idempotent writes, and the device remembers the last
 * committed transfer id with its result, so a repeated COMMIT is answered
 * again and never applied twice. Every request checks its payload length.
 */
#include "board_app.h"

#include <string.h>

#include "board_config.h"
#include "checkpoint.h"
#include "crc32.h"
#include "frame.h"
#include "model.h"

#ifndef BOARD_TEST_HOOKS
    #define BOARD_TEST_HOOKS 0
#endif
#ifndef BOARD_DEFAULT_LR
    #define BOARD_DEFAULT_LR 0.0f
#endif

#define WINDOW 64u

/* training counters, saved in checkpoints (64 bytes) */
typedef struct
{
    uint32_t version;
    uint32_t steps; /* training steps applied since the seed (or restored) */
    uint32_t seed;
    uint32_t last_sample_id;
    float lr;
    uint32_t samples; /* since CLEAR_STATS */
    uint32_t correct;
    float loss_sum;
    uint32_t reserved[8];
} board_persist;

static struct
{
    board_persist p;
    float win_loss[WINDOW];
    uint8_t win_correct[WINDOW];
    uint32_t win_n, win_pos;
    uint32_t infers, dups, bad_frames, errors;
    uint32_t ckpt_seq;
    int restored;
} st;

/* the chunked transfer being received (PROTOCOL.md, "Chunked transfers") */
static struct
{
    int active;
    uint32_t xid;
    uint8_t kind;
    uint32_t chunk, off, total, crc;
    uint32_t done; /* bytes 0 .. done-1 of the transfer have arrived (in order) */
} xfer;

/* the last committed transfer and its answer (a result or an ERROR), sent again for a repeated COMMIT */
#define XDONE_MAX 128u
static struct
{
    int valid;
    uint32_t xid;
    uint8_t kind;
    uint32_t off, total, crc;
    uint8_t type;
    uint8_t len;
    uint8_t payload[XDONE_MAX];
} xdone;

static const uint8_t model_hash[CKPT_HASH_BYTES] = BOARD_MODEL_HASH;
static pk_rx rx;
static pk_msg resp;  /* response to an idempotent request */
static pk_msg cache; /* response to the last state-changing request */
static struct
{
    int valid;
    uint8_t type;
    uint16_t seq;
    uint32_t crc;
} last;

static void put_byte(void *ctx, uint8_t b)
{
    (void)ctx;
    board_putc(b);
}

static uint32_t inputs_total(void)
{
    uint32_t n = 0;
    for (int i = 0; i < POCKMCU_NUM_INPUTS; i++)
    {
        n += pockmcu_input_bytes(i);
    }
    return n;
}

static uint32_t outputs_total(void)
{
    uint32_t n = 0;
    for (int i = 0; i < POCKMCU_NUM_OUTPUTS; i++)
    {
        n += pockmcu_output_bytes(i);
    }
    return n;
}

/* copy into the inputs, all concatenated, starting at byte off */
static void inputs_write(uint32_t off, const uint8_t *src, uint32_t n)
{
    for (int i = 0; i < POCKMCU_NUM_INPUTS && n; i++)
    {
        uint32_t b = pockmcu_input_bytes(i);
        if (off >= b)
        {
            off -= b;
            continue;
        }
        uint32_t k = b - off < n ? b - off : n;
        memcpy((uint8_t *)pockmcu_input(i) + off, src, k);
        src += k;
        n -= k;
        off = 0;
    }
}

/* copy n bytes of the outputs, all concatenated, starting at byte off */
static void outputs_read(uint32_t off, uint8_t *dst, uint32_t n)
{
    for (int i = 0; i < POCKMCU_NUM_OUTPUTS && n; i++)
    {
        uint32_t b = pockmcu_output_bytes(i);
        if (off >= b)
        {
            off -= b;
            continue;
        }
        uint32_t k = b - off < n ? b - off : n;
        memcpy(dst, (const uint8_t *)pockmcu_output(i) + off, k);
        dst += k;
        n -= k;
        off = 0;
    }
}

static void error_msg(pk_msg *m, uint16_t seq, int code, uint8_t ref, const char *text)
{
    pk_msg_start(m, PK_T_ERROR, seq);
    pk_msg_u8(m, (uint8_t)code);
    pk_msg_u8(m, ref);
    pk_msg_u16(m, 0);
    pk_msg_put(m, text, (uint32_t)strlen(text));
    st.errors++;
}

/* 1 (and an ERROR 6 in m) if the payload length is wrong: ok is the request's length rule */
static int bad_length(const pk_frame *f, pk_msg *m, int ok, const char *text)
{
    if (ok)
    {
        return 0;
    }
    error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, text);
    return 1;
}

#ifdef POCKMCU_TRAINING
    #define HAVE_TRAINING 1
    #define LABEL_BYTES POCKMCU_LABEL_BYTES
static uint8_t label_buf[POCKMCU_LABEL_BYTES] __attribute__((aligned(8)));

static uint32_t params_bytes(void) { return pockmcu_params_bytes(); }

    /* Per trainable tensor: the largest |value| a written int32 bias may have so that the op's
     * accumulator (bias + K products of an int8 weight and an input offset by its zero point, each
     * at most 128 * 256) cannot overflow int32; -1: no limit (int8 tensors: any value is safe).
     * Computed by pockmcu/board/firmware.py (param_limits) into board_config.h. */
    #ifndef BOARD_PARAM_LIMITS
        #error "board_config.h has no BOARD_PARAM_LIMITS: build the board app with pockmcu/board/firmware.py"
    #endif
static const int32_t param_limits[] = BOARD_PARAM_LIMITS;
typedef char
    param_limits_one_per_tensor[(sizeof param_limits / sizeof param_limits[0] == POCKMCU_NUM_TRAINABLE) ? 1 : -1];

/* Would writing n bytes of src at parameter offset off keep every limited (int32) tensor within its
 * limit? An element only partly inside the range is checked with its other bytes as they are now.
 * Returns -1 if so, else the index of the first tensor that would leave its limit. */
static int params_check(uint32_t off, const uint8_t *src, uint32_t n)
{
    uint32_t base = 0;
    for (int k = 0; k < POCKMCU_NUM_TRAINABLE; k++)
    {
        uint32_t b = 0;
        const uint8_t *t = (const uint8_t *)pockmcu_param_tensor(k, &b);
        int32_t lim = param_limits[k];
        if (lim >= 0 && off < base + b && off + n > base)
        {
            uint32_t lo = off > base ? off - base : 0u;
            uint32_t hi = (off + n < base + b ? off + n : base + b) - base;
            for (uint32_t e = lo / 4u; e * 4u < hi; e++)
            {
                uint8_t v8[4];
                for (uint32_t j = 0; j < 4u; j++)
                {
                    uint32_t pos = base + 4u * e + j;
                    v8[j] = (pos >= off && pos - off < n) ? src[pos - off] : t[4u * e + j];
                }
                int32_t v = (int32_t)pk_get_u32(v8);
                if (v > lim || v < -lim)
                {
                    return k;
                }
            }
        }
        base += b;
    }
    return -1;
}

/* copy n parameter bytes at off (the pockmcu_params_read layout) to (write=0) or from (write=1) buf */
static void params_copy(uint32_t off, uint8_t *buf, uint32_t n, int write)
{
    for (int k = 0; k < POCKMCU_NUM_TRAINABLE && n; k++)
    {
        uint32_t b = 0;
        uint8_t *t = (uint8_t *)(uintptr_t)pockmcu_param_tensor(k, &b); /* the RAM copy: writable */
        if (off >= b)
        {
            off -= b;
            continue;
        }
        uint32_t c = b - off < n ? b - off : n;
        if (write)
        {
            memcpy(t + off, buf, c);
        }
        else
        {
            memcpy(buf, t + off, c);
        }
        buf += c;
        n -= c;
        off = 0;
    }
}

    #if BOARD_CKPT_SLOT_BYTES > 0
static const ckpt_layout layout = {BOARD_CKPT_BASE, BOARD_CKPT_SLOT_BYTES};

/* payload = the counters, every trainable tensor, then the training state (step count,
 * optimizer, RNG streams, momentum): a restored run continues bit for bit */
static int ckpt_segments(ckpt_seg *segs)
{
    int n = 0;
    uint32_t b = 0;
    segs[n].ptr = &st.p;
    segs[n].len = sizeof st.p;
    n++;
    for (int k = 0; k < POCKMCU_NUM_TRAINABLE; k++)
    {
        segs[n].ptr = (void *)(uintptr_t)pockmcu_param_tensor(k, &b);
        segs[n].len = b;
        n++;
    }
    segs[n].ptr = pockmcu_train_state(&b);
    segs[n].len = b;
    n++;
    return n;
}

static uint32_t train_state_bytes(void)
{
    uint32_t b = 0;
    (void)pockmcu_train_state(&b);
    return b;
}

/* restore the newest checkpoint into RAM; 0 if there is none */
static int ckpt_load_newest(void)
{
    ckpt_info info;
    ckpt_seg segs[POCKMCU_NUM_TRAINABLE + 2];
    ckpt_find(&layout, model_hash, &info);
    if (info.slot < 0)
    {
        return 0;
    }
    /* check the counters' version before touching the parameters */
    board_persist tmp;
    ckpt_seg one = {&tmp, sizeof tmp};
    ckpt_info head = info;
    head.payload_len = sizeof tmp;
    if (info.payload_len != sizeof tmp + params_bytes() + train_state_bytes() ||
        ckpt_restore(&layout, &head, &one, 1) != 0 || tmp.version != 1u)
    {
        return 0;
    }
    int n = ckpt_segments(segs);
    if (ckpt_restore(&layout, &info, segs, n) != 0)
    {
        return 0;
    }
    pockmcu_set_lr(st.p.lr);
    st.ckpt_seq = info.seq;
    return 1;
}
    #endif
#else
    #define HAVE_TRAINING 0
    #define LABEL_BYTES 0
static uint32_t params_bytes(void) { return 0; }
#endif

__attribute__((unused)) static void window_add(float loss, int correct)
{
    st.win_loss[st.win_pos] = loss;
    st.win_correct[st.win_pos] = (uint8_t)(correct != 0);
    st.win_pos = (st.win_pos + 1u) % WINDOW;
    if (st.win_n < WINDOW)
    {
        st.win_n++;
    }
}

static void clear_stats(void)
{
    st.p.samples = 0;
    st.p.correct = 0;
    st.p.loss_sum = 0.0f;
    st.win_n = 0;
    st.win_pos = 0;
}

static void reset_training(uint32_t seed)
{
    memset(&st.p, 0, sizeof st.p);
    st.p.version = 1;
    st.p.seed = seed;
    st.p.lr = BOARD_DEFAULT_LR;
    clear_stats();
}

void board_app_init(void)
{
    memset(&st, 0, sizeof st);
    memset(&xfer, 0, sizeof xfer);
    memset(&xdone, 0, sizeof xdone);
    pk_rx_init(&rx);
    last.valid = 0;
    reset_training(0);
#if HAVE_TRAINING
    (void)pockmcu_train_init(0);
    #if BOARD_CKPT_SLOT_BYTES > 0
    st.restored = ckpt_load_newest();
    #endif
#else
    (void)pockmcu_init();
#endif
}

/* ---------------------------------------------------------------- commands */

static void cmd_info(const pk_frame *f, pk_msg *m)
{
    uint32_t ram_used = 0, stack_used = 0, flash_used = 0;
    if (bad_length(f, m, f->len == 0u, "INFO takes no payload"))
    {
        return;
    }
    board_memory_use(&ram_used, &stack_used, &flash_used);
    pk_msg_start(m, PK_T_INFO | PK_T_RESPONSE, f->seq);
    pk_msg_put(m, "PKBD", 4);
    pk_msg_u16(m, PK_PROTOCOL_VERSION);
    pk_msg_u16(m, PK_FIRMWARE_VERSION);
    pk_msg_put(m, model_hash, CKPT_HASH_BYTES);
    pk_msg_u32(m, inputs_total());
    pk_msg_u32(m, outputs_total());
    pk_msg_u32(m, HAVE_TRAINING ? pockmcu_input_bytes(0) : 0u);
    pk_msg_u32(m, LABEL_BYTES);
    pk_msg_u32(m, params_bytes());
#if HAVE_TRAINING
    pk_msg_u32(m, POCKMCU_NUM_TRAINABLE);
#else
    pk_msg_u32(m, 0);
#endif
    pk_msg_u16(m, PK_MAX_PAYLOAD);
    pk_msg_u16(m,
               (uint16_t)((HAVE_TRAINING ? 1u : 0u) | (st.restored ? 2u : 0u) | (BOARD_TEST_HOOKS ? 4u : 0u) |
                          (BOARD_CKPT_SLOT_BYTES > 0 ? 8u : 0u) | (board_can_enter_bootloader() ? 16u : 0u)));
    pk_msg_u32(m, ram_used);
    pk_msg_u32(m, BOARD_RAM_BUDGET);
    pk_msg_u32(m, stack_used);
    pk_msg_u32(m, flash_used);
    pk_msg_u32(m, BOARD_APP_BYTES);
    pk_msg_u32(m, BOARD_APP_BASE);
    pk_msg_u32(m, BOARD_CKPT_BASE);
    pk_msg_u32(m, BOARD_CKPT_SLOT_BYTES);
    pk_msg_u32(m, st.ckpt_seq);
    pk_msg_u16(m, last.seq);
    pk_msg_u8(m, (uint8_t)last.valid);
    pk_msg_u8(m, 0);
    pk_msg_u32(m, board_uptime_ms());
    pk_msg_u32(m, xdone.xid);
    pk_msg_u8(m, (uint8_t)xdone.valid);
    pk_msg_u8(m, 0);
    pk_msg_u16(m, (uint16_t)PK_XFER_MAX_CHUNK);
    pk_msg_put(m, BOARD_TARGET_NAME, (uint32_t)strlen(BOARD_TARGET_NAME));
}

static void cmd_stats(const pk_frame *f, pk_msg *m)
{
    float wl = 0.0f;
    uint32_t wc = 0;
    if (bad_length(f, m, f->len == 0u, "STATS takes no payload"))
    {
        return;
    }
    for (uint32_t i = 0; i < st.win_n; i++)
    {
        wl += st.win_loss[i];
        wc += st.win_correct[i];
    }
    pk_msg_start(m, PK_T_STATS | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, st.p.steps);
#if HAVE_TRAINING
    pk_msg_u32(m, pockmcu_train_steps());
#else
    pk_msg_u32(m, 0);
#endif
    pk_msg_u32(m, st.p.seed);
    pk_msg_u32(m, st.p.last_sample_id);
    pk_msg_u32(m, st.p.samples);
    pk_msg_u32(m, st.p.correct);
    pk_msg_f32(m, st.p.samples ? st.p.loss_sum / (float)st.p.samples : 0.0f);
    pk_msg_u16(m, (uint16_t)st.win_n);
    pk_msg_u16(m, (uint16_t)wc);
    pk_msg_f32(m, st.win_n ? wl / (float)st.win_n : 0.0f);
    pk_msg_u32(m, st.infers);
    pk_msg_u32(m, st.dups);
    pk_msg_u32(m, st.bad_frames);
    pk_msg_u32(m, st.errors);
    pk_msg_u32(m, st.ckpt_seq);
    pk_msg_u32(m, board_uptime_ms());
    pk_msg_f32(m, st.p.lr);
    pk_msg_u32(m, xdone.xid);
    pk_msg_u8(m, (uint8_t)xdone.valid);
}

/* one inference on the inputs as they are; 0 (and an ERROR in m) if the model failed */
static int infer_now(const pk_frame *f, pk_msg *m)
{
    if (pockmcu_invoke() != 0)
    {
        error_msg(m, f->seq, PK_E_MODEL, f->type, "pockmcu_invoke failed");
        return 0;
    }
    st.infers++;
    return 1;
}

static void cmd_infer(const pk_frame *f, pk_msg *m)
{
    uint32_t in = inputs_total(), out = outputs_total();
    if (f->len != in && f->len != 0u)
    {
        error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, "INFER takes the inputs (or nothing: staged input)");
        return;
    }
    if (out > PK_MAX_PAYLOAD)
    {
        error_msg(m,
                  f->seq,
                  PK_E_TOO_LARGE,
                  f->type,
                  "the outputs do not fit in one frame: XFER kind INFER, then READ_OUTPUT");
        return;
    }
    if (f->len)
    {
        inputs_write(0, f->payload, f->len);
    }
    if (!infer_now(f, m))
    {
        return;
    }
    pk_msg_start(m, PK_T_INFER | PK_T_RESPONSE, f->seq);
    for (int i = 0; i < POCKMCU_NUM_OUTPUTS; i++)
    {
        pk_msg_put(m, pockmcu_output(i), pockmcu_output_bytes(i));
    }
}

static void cmd_stage_input(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len > 4u, "STAGE_INPUT takes u32 offset + 1..1020 bytes"))
    {
        return;
    }
    uint32_t off = pk_get_u32(f->payload), n = f->len - 4u, total = inputs_total();
    if (off > total || n > total - off)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "STAGE_INPUT past the end of the inputs");
        return;
    }
    inputs_write(off, f->payload + 4, n);
    pk_msg_start(m, PK_T_STAGE_INPUT | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, off);
    pk_msg_u32(m, n);
}

static void cmd_clear_stats(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 0u, "CLEAR_STATS takes no payload"))
    {
        return;
    }
    clear_stats();
    pk_msg_start(m, PK_T_CLEAR_STATS | PK_T_RESPONSE, f->seq);
}

static void cmd_ping(const pk_frame *f, pk_msg *m)
{
    pk_msg_start(m, PK_T_PING | PK_T_RESPONSE, f->seq);
    pk_msg_put(m, f->payload, f->len);
}

/* PROFILE: u32 num_ops, timer Hz, overhead ticks, stack bytes, first, then the
 * timer readings first.. of the last invoke, as many as fit one frame */
static void cmd_profile(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 0u || f->len == 4u, "PROFILE takes nothing or u32 first reading"))
    {
        return;
    }
#ifdef POCKMCU_PROFILE
    uint32_t hz = 0, overhead = 0, stack = 0, first = 0;
    const uint32_t *ticks = 0;
    if (f->len == 4u)
    {
        first = pk_get_u32(f->payload);
    }
    if (first > (uint32_t)POCKMCU_NUM_OPS + 1u)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "PROFILE first reading past num_ops + 1");
        return;
    }
    board_profile(&hz, &overhead, &stack, &ticks);
    pk_msg_start(m, PK_T_PROFILE | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, (uint32_t)POCKMCU_NUM_OPS);
    pk_msg_u32(m, hz);
    pk_msg_u32(m, overhead);
    pk_msg_u32(m, stack);
    pk_msg_u32(m, first);
    for (uint32_t i = first; i <= (uint32_t)POCKMCU_NUM_OPS; i++)
    {
        if (pk_msg_u32(m, ticks[i]) != 0)
        {
            break; /* the frame is full: ask again from here */
        }
    }
#else
    error_msg(m, f->seq, PK_E_UNSUPPORTED, f->type, "built without PROFILE=1");
#endif
}

#if HAVE_TRAINING
static void train_now(const pk_frame *f, pk_msg *m, uint32_t id);

static void cmd_train(const pk_frame *f, pk_msg *m)
{
    uint32_t in0 = pockmcu_input_bytes(0);
    if (f->len != 4u + LABEL_BYTES && f->len != 4u + LABEL_BYTES + in0)
    {
        error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, "TRAIN takes u32 sample id, label, input 0 (or staged)");
        return;
    }
    uint32_t id = pk_get_u32(f->payload);
    memcpy(label_buf, f->payload + 4, LABEL_BYTES);
    if (f->len > 4u + LABEL_BYTES)
    {
        memcpy(pockmcu_input(0), f->payload + 4 + LABEL_BYTES, in0);
    }
    pk_msg_start(m, PK_T_TRAIN | PK_T_RESPONSE, f->seq);
    train_now(f, m, id);
}

/* One training step on label_buf and input 0; appends the TRAIN result record to m (or turns m
 * into an ERROR). */
static void train_now(const pk_frame *f, pk_msg *m, uint32_t id)
{
    pockmcu_step_result r;
    int rc = pockmcu_train_step(label_buf, &r);
    if (rc == -1)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "label outside the model's classes");
        return;
    }
    if (rc != 0)
    {
        error_msg(m, f->seq, PK_E_MODEL, f->type, "pockmcu_train_step failed");
        return;
    }
    st.p.steps++;
    st.p.last_sample_id = id;
    st.p.samples++;
    st.p.correct += (uint32_t)(r.correct != 0);
    st.p.loss_sum += r.loss;
    window_add(r.loss, r.correct);
    pk_msg_u32(m, id);
    pk_msg_u32(m, st.p.steps);
    pk_msg_f32(m, r.loss);
    pk_msg_u32(m, (uint32_t)r.prediction);
    pk_msg_u8(m, (uint8_t)(r.correct != 0));
}

static int params_range(const pk_frame *f, pk_msg *m, uint32_t off, uint32_t n)
{
    uint32_t total = params_bytes();
    if (off > total || n > total - off)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "parameter range past the end");
        return 0;
    }
    return 1;
}

static void cmd_read_params(const pk_frame *f, pk_msg *m)
{
    if (f->len != 6u)
    {
        error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, "READ_PARAMS takes u32 offset, u16 length");
        return;
    }
    uint32_t off = pk_get_u32(f->payload), n = pk_get_u16(f->payload + 4);
    if (n > PK_MAX_PAYLOAD - 4u)
    {
        error_msg(m, f->seq, PK_E_TOO_LARGE, f->type, "READ_PARAMS length over max payload - 4");
        return;
    }
    if (!params_range(f, m, off, n))
    {
        return;
    }
    pk_msg_start(m, PK_T_READ_PARAMS | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, off);
    params_copy(off, pk_msg_reserve(m, n), n, 0);
}

static void cmd_write_params(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len > 4u, "WRITE_PARAMS takes u32 offset + 1..1020 bytes"))
    {
        return;
    }
    uint32_t off = pk_get_u32(f->payload), n = f->len - 4u;
    if (!params_range(f, m, off, n))
    {
        return;
    }
    if (params_check(off, f->payload + 4, n) >= 0)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "a bias outside its limit (it could overflow the accumulator)");
        return;
    }
    params_copy(off, (uint8_t *)(uintptr_t)(f->payload + 4), n, 1);
    pk_msg_start(m, PK_T_WRITE_PARAMS | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, off);
    pk_msg_u32(m, n);
}

static void cmd_set_seed(const pk_frame *f, pk_msg *m)
{
    if (f->len != 4u)
    {
        error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, "SET_SEED takes u32 seed");
        return;
    }
    uint32_t seed = pk_get_u32(f->payload);
    float lr = st.p.lr;
    if (pockmcu_train_init(seed) != 0)
    {
        error_msg(m, f->seq, PK_E_MODEL, f->type, "pockmcu_train_init failed");
        return;
    }
    reset_training(seed);
    st.p.lr = lr; /* the learning rate is a setting, not training state */
    pk_msg_start(m, PK_T_SET_SEED | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, seed);
}

static void cmd_set_lr(const pk_frame *f, pk_msg *m)
{
    float lr;
    if (f->len != 4u)
    {
        error_msg(m, f->seq, PK_E_BAD_LENGTH, f->type, "SET_LR takes f32");
        return;
    }
    memcpy(&lr, f->payload, 4);
    if (!(lr >= 0.0f && lr < 1e6f))
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "learning rate must be finite and >= 0");
        return;
    }
    pockmcu_set_lr(lr);
    st.p.lr = lr;
    pk_msg_start(m, PK_T_SET_LR | PK_T_RESPONSE, f->seq);
    pk_msg_f32(m, lr);
}

static void cmd_save(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 0u || f->len == 4u, "SAVE takes nothing (or u32 cut-after for tests)"))
    {
        return;
    }
    #if BOARD_CKPT_SLOT_BYTES > 0
    if (f->len == 4u)
    {
        if (!BOARD_TEST_HOOKS)
        {
            error_msg(m, f->seq, PK_E_UNSUPPORTED, f->type, "power-cut test hook not built in");
            return;
        }
        board_flash_cut_budget = (int32_t)(pk_get_u32(f->payload) & 0x7FFFFFFFu);
    }
    ckpt_seg segs[POCKMCU_NUM_TRAINABLE + 2];
    int n = ckpt_segments(segs);
    ckpt_info saved;
    int rc = ckpt_save(&layout, model_hash, segs, n, &saved);
    board_flash_cut_budget = -1;
    if (rc != 0)
    {
        error_msg(m, f->seq, PK_E_FLASH, f->type, "checkpoint write failed");
        return;
    }
    st.ckpt_seq = saved.seq;
    pk_msg_start(m, PK_T_SAVE | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, saved.seq);
    pk_msg_u8(m, (uint8_t)saved.slot);
    #else
    error_msg(m, f->seq, PK_E_UNSUPPORTED, f->type, "no checkpoint area on this build");
    #endif
}

static void cmd_load(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 0u, "LOAD takes no payload"))
    {
        return;
    }
    #if BOARD_CKPT_SLOT_BYTES > 0
    if (!ckpt_load_newest())
    {
        error_msg(m, f->seq, PK_E_NO_CKPT, f->type, "no valid checkpoint for this model");
        return;
    }
    st.win_n = 0;
    st.win_pos = 0;
    pk_msg_start(m, PK_T_LOAD | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, st.ckpt_seq);
    pk_msg_u32(m, st.p.steps);
    #else
    error_msg(m, f->seq, PK_E_UNSUPPORTED, f->type, "no checkpoint area on this build");
    #endif
}
#endif

/* ---------------------------------------------------------------- chunked transfers */

static void cmd_read_output(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 6u, "READ_OUTPUT takes u32 offset, u16 length"))
    {
        return;
    }
    uint32_t off = pk_get_u32(f->payload), n = pk_get_u16(f->payload + 4), total = outputs_total();
    if (n > PK_MAX_PAYLOAD - 4u)
    {
        error_msg(m, f->seq, PK_E_TOO_LARGE, f->type, "READ_OUTPUT length over max payload - 4");
        return;
    }
    if (off > total || n > total - off)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "READ_OUTPUT past the end of the outputs");
        return;
    }
    pk_msg_start(m, PK_T_READ_OUTPUT | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, off);
    outputs_read(off, pk_msg_reserve(m, n), n);
}

/* n bytes at transfer position pos into the kind's destination */
static void xfer_write(uint32_t pos, const uint8_t *src, uint32_t n)
{
    if (xfer.kind == PK_X_INFER)
    {
        inputs_write(pos, src, n);
        return;
    }
#if HAVE_TRAINING
    if (xfer.kind == PK_X_TRAIN)
    {
        if (pos < LABEL_BYTES)
        {
            uint32_t k = LABEL_BYTES - pos < n ? LABEL_BYTES - pos : n;
            memcpy(label_buf + pos, src, k);
            pos += k;
            src += k;
            n -= k;
        }
        if (n)
        {
            memcpy((uint8_t *)pockmcu_input(0) + (pos - LABEL_BYTES), src, n);
        }
        return;
    }
    params_copy(xfer.off + pos, (uint8_t *)(uintptr_t)src, n, 1);
#endif
}

/* CRC-32 of the transfer's destination as it is now */
static uint32_t xfer_crc(void)
{
    uint32_t crc = 0;
    if (xfer.kind == PK_X_INFER)
    {
        for (int i = 0; i < POCKMCU_NUM_INPUTS; i++)
        {
            crc = pk_crc32(crc, pockmcu_input(i), pockmcu_input_bytes(i));
        }
        return crc;
    }
#if HAVE_TRAINING
    if (xfer.kind == PK_X_TRAIN)
    {
        crc = pk_crc32(crc, label_buf, LABEL_BYTES);
        return pk_crc32(crc, pockmcu_input(0), pockmcu_input_bytes(0));
    }
    uint32_t off = xfer.off, n = xfer.total;
    for (int k = 0; k < POCKMCU_NUM_TRAINABLE && n; k++)
    {
        uint32_t b = 0;
        const uint8_t *t = (const uint8_t *)pockmcu_param_tensor(k, &b);
        if (off >= b)
        {
            off -= b;
            continue;
        }
        uint32_t c = b - off < n ? b - off : n;
        crc = pk_crc32(crc, t + off, c);
        n -= c;
        off = 0;
    }
#endif
    return crc;
}

static void cmd_xfer_begin(const pk_frame *f, pk_msg *m)
{
    if (bad_length(
            f, m, f->len == 20u, "XFER_BEGIN takes u32 xid, u8 kind, u8 0, u16 chunk, u32 offset, u32 total, u32 crc"))
    {
        return;
    }
    const uint8_t *p = f->payload;
    uint32_t xid = pk_get_u32(p), kind = p[4], chunk = pk_get_u16(p + 6);
    uint32_t off = pk_get_u32(p + 8), total = pk_get_u32(p + 12), crc = pk_get_u32(p + 16);
    uint32_t want = total;
    if (p[5] != 0u || chunk == 0u || chunk > PK_XFER_MAX_CHUNK)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "XFER_BEGIN: chunk must be 1..1016 bytes, byte 5 zero");
        return;
    }
    if (kind == PK_X_INFER)
    {
        want = inputs_total();
    }
    else if (kind == PK_X_TRAIN || kind == PK_X_PARAMS)
    {
#if HAVE_TRAINING
        uint32_t pb = params_bytes();
        if (kind == PK_X_TRAIN)
        {
            want = LABEL_BYTES + pockmcu_input_bytes(0);
        }
        else if (total == 0u || off > pb || total > pb - off)
        {
            error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "XFER_BEGIN: parameter range past the end");
            return;
        }
#else
        error_msg(m, f->seq, PK_E_NO_TRAINING, f->type, "model generated without --train");
        return;
#endif
    }
    else
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "XFER_BEGIN: unknown transfer kind");
        return;
    }
    if (total != want || (kind != PK_X_PARAMS && off != 0u))
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "XFER_BEGIN: wrong total for this kind (INFO), or offset not 0");
        return;
    }
    uint8_t state = 0;
    uint32_t next = 0;
    if (xdone.valid && xdone.xid == xid)
    {
        if (xdone.kind != kind || xdone.off != off || xdone.total != total || xdone.crc != crc)
        {
            error_msg(m, f->seq, PK_E_XFER, f->type, "transfer id already committed with other data");
            return;
        }
        state = 1; /* already applied: COMMIT answers its result again */
        next = total;
    }
    else
    {
        if (!(xfer.active && xfer.xid == xid && xfer.kind == kind && xfer.off == off && xfer.total == total &&
              xfer.crc == crc))
        {
            xfer.active = 1; /* a new transfer (any other one is abandoned) */
            xfer.xid = xid;
            xfer.kind = (uint8_t)kind;
            xfer.off = off;
            xfer.total = total;
            xfer.crc = crc;
            xfer.done = 0;
        }
        xfer.chunk = chunk; /* the same transfer again: resume, possibly with another chunk size */
        next = xfer.done - xfer.done % chunk;
    }
    pk_msg_start(m, PK_T_XFER_BEGIN | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, xid);
    pk_msg_u8(m, state);
    pk_msg_u8(m, 0);
    pk_msg_u16(m, (uint16_t)chunk);
    pk_msg_u32(m, next);
}

static void cmd_xfer_chunk(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len > 8u, "XFER_CHUNK takes u32 xid, u32 offset, 1..1016 bytes"))
    {
        return;
    }
    uint32_t xid = pk_get_u32(f->payload), pos = pk_get_u32(f->payload + 4), n = f->len - 8u;
    const uint8_t *data = f->payload + 8;
    if (!xfer.active || xfer.xid != xid)
    {
        error_msg(m, f->seq, PK_E_XFER, f->type, "no such transfer: XFER_BEGIN first");
        return;
    }
    if (pos % xfer.chunk != 0u || pos >= xfer.total)
    {
        error_msg(m, f->seq, PK_E_XFER, f->type, "chunk offset is not a chunk boundary inside the transfer");
        return;
    }
    if (bad_length(f,
                   m,
                   n == (xfer.total - pos < xfer.chunk ? xfer.total - pos : xfer.chunk),
                   "a chunk is exactly the transfer's chunk size (the last one: the rest)"))
    {
        return;
    }
    if (pos > xfer.done)
    {
        error_msg(m, f->seq, PK_E_XFER, f->type, "chunk out of order: XFER_BEGIN again tells where to resume");
        return;
    }
#if HAVE_TRAINING
    if (xfer.kind == PK_X_PARAMS && params_check(xfer.off + pos, data, n) >= 0)
    {
        error_msg(m, f->seq, PK_E_BAD_ARG, f->type, "a bias outside its limit (it could overflow the accumulator)");
        return;
    }
#endif
    xfer_write(pos, data, n);
    if (pos + n > xfer.done)
    {
        xfer.done = pos + n;
    }
    pk_msg_start(m, PK_T_XFER_CHUNK | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, xid);
    pk_msg_u32(m, xfer.done);
}

static void cmd_xfer_commit(const pk_frame *f, pk_msg *m)
{
    if (bad_length(f, m, f->len == 4u || f->len == 8u, "XFER_COMMIT takes u32 xid (kind TRAIN: and u32 sample id)"))
    {
        return;
    }
    uint32_t xid = pk_get_u32(f->payload);
    if (xdone.valid && xdone.xid == xid)
    {
        st.dups++; /* applied already: the same answer again, nothing applied */
        pk_msg_start(m, xdone.type, f->seq);
        pk_msg_put(m, xdone.payload, xdone.len);
        return;
    }
    if (!xfer.active || xfer.xid != xid)
    {
        error_msg(m, f->seq, PK_E_XFER, f->type, "no such transfer: XFER_BEGIN first");
        return;
    }
    if (bad_length(f, m, (f->len == 8u) == (xfer.kind == PK_X_TRAIN), "XFER_COMMIT: u32 sample id for TRAIN only"))
    {
        return;
    }
    if (xfer.done < xfer.total)
    {
        error_msg(m, f->seq, PK_E_XFER, f->type, "transfer incomplete: XFER_BEGIN again tells where to resume");
        return;
    }
    if (xfer_crc() != xfer.crc)
    {
        xfer.done = 0;
        error_msg(m, f->seq, PK_E_XFER, f->type, "transfer CRC mismatch: send every chunk again");
        return;
    }
    xfer.active = 0; /* the data is consumed (a training step or an inference may overwrite the inputs) */
    pk_msg_start(m, PK_T_XFER_COMMIT | PK_T_RESPONSE, f->seq);
    pk_msg_u32(m, xid);
    pk_msg_u8(m, xfer.kind);
    pk_msg_u8(m, 0);
    pk_msg_u16(m, 0);
    if (xfer.kind == PK_X_INFER)
    {
        if (infer_now(f, m))
        {
            pk_msg_u32(m, outputs_total());
        }
    }
#if HAVE_TRAINING
    else if (xfer.kind == PK_X_TRAIN)
    {
        train_now(f, m, pk_get_u32(f->payload + 4));
    }
    else
    {
        pk_msg_u32(m, xfer.off);
        pk_msg_u32(m, xfer.total);
    }
#endif
    /* remember the answer, result or ERROR: a repeated COMMIT gets it again */
    xdone.valid = 1;
    xdone.xid = xid;
    xdone.kind = xfer.kind;
    xdone.off = xfer.off;
    xdone.total = xfer.total;
    xdone.crc = xfer.crc;
    xdone.type = m->buf[0];
    xdone.len = (uint8_t)(m->len - PK_HEADER_BYTES);
    memcpy(xdone.payload, m->buf + PK_HEADER_BYTES, xdone.len);
}

/* ---------------------------------------------------------------- dispatch */

/* requests not remembered for retransmissions: they change nothing, or (XFER_*) they carry their own
 * transfer id and are safe to repeat */
static int not_remembered(uint8_t t)
{
    return t == PK_T_INFO || t == PK_T_STATS || t == PK_T_READ_PARAMS || t == PK_T_PING || t == PK_T_PROFILE ||
        t == PK_T_READ_OUTPUT || t == PK_T_XFER_BEGIN || t == PK_T_XFER_CHUNK || t == PK_T_XFER_COMMIT;
}

static int execute(const pk_frame *f, pk_msg *m)
{
    switch (f->type)
    {
    case PK_T_INFO:
        cmd_info(f, m);
        return BOARD_ACT_NONE;
    case PK_T_STATS:
        cmd_stats(f, m);
        return BOARD_ACT_NONE;
    case PK_T_INFER:
        cmd_infer(f, m);
        return BOARD_ACT_NONE;
    case PK_T_STAGE_INPUT:
        cmd_stage_input(f, m);
        return BOARD_ACT_NONE;
    case PK_T_CLEAR_STATS:
        cmd_clear_stats(f, m);
        return BOARD_ACT_NONE;
    case PK_T_PING:
        cmd_ping(f, m);
        return BOARD_ACT_NONE;
    case PK_T_PROFILE:
        cmd_profile(f, m);
        return BOARD_ACT_NONE;
    case PK_T_READ_OUTPUT:
        cmd_read_output(f, m);
        return BOARD_ACT_NONE;
    case PK_T_XFER_BEGIN:
        cmd_xfer_begin(f, m);
        return BOARD_ACT_NONE;
    case PK_T_XFER_CHUNK:
        cmd_xfer_chunk(f, m);
        return BOARD_ACT_NONE;
    case PK_T_XFER_COMMIT:
        cmd_xfer_commit(f, m);
        return BOARD_ACT_NONE;
    case PK_T_RESET:
        if (bad_length(f, m, f->len == 0u, "RESET takes no payload"))
        {
            return BOARD_ACT_NONE;
        }
        pk_msg_start(m, PK_T_RESET | PK_T_RESPONSE, f->seq);
        return BOARD_ACT_RESET;
    case PK_T_BOOTLOADER:
        if (bad_length(f, m, f->len == 0u, "BOOTLOADER takes no payload"))
        {
            return BOARD_ACT_NONE;
        }
        if (!board_can_enter_bootloader())
        {
            error_msg(m, f->seq, PK_E_UNSUPPORTED, f->type, "this board has no bootloader to enter");
            return BOARD_ACT_NONE;
        }
        pk_msg_start(m, PK_T_BOOTLOADER | PK_T_RESPONSE, f->seq);
        return BOARD_ACT_BOOTLOADER;
#if HAVE_TRAINING
    case PK_T_TRAIN:
        cmd_train(f, m);
        return BOARD_ACT_NONE;
    case PK_T_READ_PARAMS:
        cmd_read_params(f, m);
        return BOARD_ACT_NONE;
    case PK_T_WRITE_PARAMS:
        cmd_write_params(f, m);
        return BOARD_ACT_NONE;
    case PK_T_SAVE:
        cmd_save(f, m);
        return BOARD_ACT_NONE;
    case PK_T_LOAD:
        cmd_load(f, m);
        return BOARD_ACT_NONE;
    case PK_T_SET_SEED:
        cmd_set_seed(f, m);
        return BOARD_ACT_NONE;
    case PK_T_SET_LR:
        cmd_set_lr(f, m);
        return BOARD_ACT_NONE;
#else
    case PK_T_TRAIN:
    case PK_T_READ_PARAMS:
    case PK_T_WRITE_PARAMS:
    case PK_T_SAVE:
    case PK_T_LOAD:
    case PK_T_SET_SEED:
    case PK_T_SET_LR:
        error_msg(m, f->seq, PK_E_NO_TRAINING, f->type, "model generated without --train");
        return BOARD_ACT_NONE;
#endif
    default:
        error_msg(m, f->seq, PK_E_UNKNOWN_TYPE, f->type, "unknown request type");
        return BOARD_ACT_NONE;
    }
}

int board_app_byte(uint8_t b)
{
    pk_frame f;
    int rc = pk_rx_feed(&rx, b, &f);
    if (rc == 0)
    {
        return BOARD_ACT_NONE;
    }
    if (rc < 0)
    {
        st.bad_frames++;
        error_msg(&resp,
                  PK_SEQ_NONE,
                  -rc,
                  0,
                  rc == -PK_ERR_CRC            ? "bad CRC"
                      : rc == -PK_ERR_COBS     ? "bad COBS"
                      : rc == -PK_ERR_TOO_LONG ? "frame too long"
                                               : "frame too short");
        pk_msg_finish(&resp);
        pk_msg_send(&resp, put_byte, NULL);
        return BOARD_ACT_NONE;
    }
    if (f.type & PK_T_RESPONSE || f.type == PK_T_ERROR || f.seq == PK_SEQ_NONE)
    {
        error_msg(&resp, f.seq, PK_E_UNKNOWN_TYPE, f.type, "not a request (response type or seq 0xFFFF)");
        pk_msg_finish(&resp);
        pk_msg_send(&resp, put_byte, NULL);
        return BOARD_ACT_NONE;
    }
    if (not_remembered(f.type))
    {
        execute(&f, &resp);
        pk_msg_finish(&resp);
        pk_msg_send(&resp, put_byte, NULL);
        return BOARD_ACT_NONE;
    }
    if (last.valid && last.seq == f.seq && last.type == f.type && last.crc == f.crc)
    {
        st.dups++; /* a retransmission: answer again, apply nothing */
        pk_msg_send(&cache, put_byte, NULL);
        return BOARD_ACT_NONE;
    }
    int act = execute(&f, &cache);
    pk_msg_finish(&cache);
    last.valid = 1;
    last.seq = f.seq;
    last.type = f.type;
    last.crc = f.crc;
    pk_msg_send(&cache, put_byte, NULL);
    return act;
}
