/*
 * The board runtime's protocol handler (firmware/PROTOCOL.md): frames in,
 * commands applied to the generated model, responses out. Platform-free:
 * firmware/board_main.c runs it on a board or in QEMU, proto/host_harness.c
 * on the host (fuzzing). The platform provides the hooks below.
 */
#ifndef POCKMCU_PROTO_BOARD_APP_H
#define POCKMCU_PROTO_BOARD_APP_H

#include <stdint.h>

/* request types (responses are type | 0x80) */
#define PK_T_INFO 0x01u
#define PK_T_STATS 0x02u
#define PK_T_INFER 0x03u
#define PK_T_TRAIN 0x04u
#define PK_T_READ_PARAMS 0x05u
#define PK_T_WRITE_PARAMS 0x06u
#define PK_T_SAVE 0x07u
#define PK_T_LOAD 0x08u
#define PK_T_SET_SEED 0x09u
#define PK_T_RESET 0x0Au
#define PK_T_SET_LR 0x0Bu
#define PK_T_STAGE_INPUT 0x0Cu
#define PK_T_CLEAR_STATS 0x0Du
#define PK_T_BOOTLOADER 0x0Eu
#define PK_T_PING 0x0Fu
#define PK_T_PROFILE 0x10u
#define PK_T_XFER_BEGIN 0x11u  /* chunked transfer: start (or resume) transfer xid */
#define PK_T_XFER_CHUNK 0x12u  /* chunked transfer: one fixed-size chunk */
#define PK_T_XFER_COMMIT 0x13u /* chunked transfer: check the whole CRC, apply once */
#define PK_T_READ_OUTPUT 0x14u /* a range of the outputs of the last inference */
#define PK_T_RESPONSE 0x80u
#define PK_T_ERROR 0x7Fu

/* error codes, first payload byte of an error frame (1-4: frame errors, frame.h) */
#define PK_E_UNKNOWN_TYPE 5
#define PK_E_BAD_LENGTH 6
#define PK_E_BAD_ARG 7
#define PK_E_NO_CKPT 8
#define PK_E_FLASH 9
#define PK_E_NO_TRAINING 10
#define PK_E_MODEL 11
#define PK_E_TOO_LARGE 12
#define PK_E_UNSUPPORTED 13
#define PK_E_XFER 14 /* chunked transfer: no such transfer, chunk out of order, incomplete, CRC mismatch */

/* chunked transfer kinds (XFER_BEGIN) */
#define PK_X_TRAIN 1u  /* label, then input 0; COMMIT applies one training step */
#define PK_X_INFER 2u  /* all inputs concatenated; COMMIT runs one inference (outputs: READ_OUTPUT) */
#define PK_X_PARAMS 3u /* a range of the parameters (written as chunks arrive, checked against the limits) */
/* largest chunk: the payload less XFER_CHUNK's u32 xid and u32 offset */
#define PK_XFER_MAX_CHUNK (PK_MAX_PAYLOAD - 8u)

#define PK_PROTOCOL_VERSION 2u
#define PK_FIRMWARE_VERSION 0x0200u

/* what the platform must do after the response went out */
#define BOARD_ACT_NONE 0
#define BOARD_ACT_RESET 1
#define BOARD_ACT_BOOTLOADER 2

/* platform hooks */
void board_putc(uint8_t b);
uint32_t board_uptime_ms(void);
void board_memory_use(uint32_t *ram_used, uint32_t *stack_used, uint32_t *flash_used);
int board_can_enter_bootloader(void);
extern int32_t board_flash_cut_budget; /* board_flash_ram.c; -1 = off */
#ifdef POCKMCU_PROFILE
/* PROFILE (builds with -DPOCKMCU_PROFILE only): the timer's Hz, the ticks of an
 * empty measured region, the thread stack size in bytes, and the
 * POCKMCU_NUM_OPS + 1 timer readings taken during the last invoke. */
void board_profile(uint32_t *timer_hz, uint32_t *overhead_ticks, uint32_t *stack_bytes, const uint32_t **ticks);
#endif

void board_app_init(void);     /* at boot: init the model, restore the newest checkpoint */
int board_app_byte(uint8_t b); /* one received byte; returns BOARD_ACT_* */

#endif
