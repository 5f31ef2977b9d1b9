/*
 * pockmcu serial app: inference driven over the port's UART (real boards, or
 * QEMU with -serial tcp:...). All integers are uint32 little-endian.
 *
 * The host sends commands, one byte each; the device answers:
 *   'H' -> 32-byte hello, 8 words: magic "PKMU" (0x554D4B50), version 1,
 *       input bytes per sample (all inputs concatenated), output bytes per
 *       sample, num_ops, profile (0/1), timer_hz, overhead_ticks (0 without
 *       profile; see semihost_main.c). Send it first: it also tells the host
 *       the board is up.
 *   'I' + one sample's input bytes -> status byte (0 = ok, else the
 *       app_common.h status), output bytes, and with profile num_ops + 1
 *       timer words (as in profile.bin). A failed invoke still sends the
 *       output and profile bytes so the stream stays in step.
 *   'S' -> 3 words: samples so far, stack high-water bytes, stack size bytes.
 *   anything else -> one byte 0xFF.
 */
#include "app_common.h"

static uint32_t rx_bytes(uint8_t *dst, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        int c = port_uart_getc();
        if (c < 0) {
            port_console_puts("pockmcu: this port has no UART\n");
            port_exit(APP_EXIT_IO);
        }
        dst[k] = (uint8_t)c;
    }
    return n;
}

static void tx_bytes(const uint8_t *src, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        port_uart_putc(src[k]);
    }
}

static void tx_words(const uint32_t *w, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        uint8_t b[4];
        b[0] = (uint8_t)w[k];
        b[1] = (uint8_t)(w[k] >> 8);
        b[2] = (uint8_t)(w[k] >> 16);
        b[3] = (uint8_t)(w[k] >> 24);
        tx_bytes(b, 4);
    }
}

int main(void)
{
    if (pockmcu_init() != 0) {
        port_console_puts("pockmcu: pockmcu_init failed\n");
        return APP_EXIT_INIT;
    }
    uint32_t in_total = 0, out_total = 0;
    for (int i = 0; i < POCKMCU_NUM_INPUTS; i++) {
        in_total += pockmcu_input_bytes(i);
    }
    for (int i = 0; i < POCKMCU_NUM_OUTPUTS; i++) {
        out_total += pockmcu_output_bytes(i);
    }
    uint32_t hello[8];
    hello[0] = 0x554D4B50u; /* "PKMU" */
    hello[1] = 1u;
    hello[2] = in_total;
    hello[3] = out_total;
    hello[4] = (uint32_t)POCKMCU_NUM_OPS;
#ifdef POCKMCU_PROFILE
    hello[5] = 1u;
    hello[7] = pockmcu_profile_overhead();
#else
    hello[5] = 0u;
    hello[7] = 0u;
#endif
    hello[6] = port_timer_hz();

    uint32_t samples = 0;
    for (;;) {
        uint8_t cmd;
        rx_bytes(&cmd, 1);
        if (cmd == 'H') {
            tx_words(hello, 8);
        } else if (cmd == 'I') {
            for (int i = 0; i < POCKMCU_NUM_INPUTS; i++) {
                rx_bytes((uint8_t *)pockmcu_input(i), pockmcu_input_bytes(i));
            }
            uint8_t status = pockmcu_invoke() == 0 ? 0u : (uint8_t)APP_EXIT_INVOKE;
            tx_bytes(&status, 1);
            for (int i = 0; i < POCKMCU_NUM_OUTPUTS; i++) {
                tx_bytes((const uint8_t *)pockmcu_output(i), pockmcu_output_bytes(i));
            }
#ifdef POCKMCU_PROFILE
            tx_words(pockmcu_profile_ticks, POCKMCU_NUM_OPS + 1);
#endif
            samples++;
        } else if (cmd == 'S') {
            uint32_t st[3];
            st[0] = samples;
            st[1] = port_stack_used();
            st[2] = port_stack_size();
            tx_words(st, 3);
        } else {
            uint8_t bad = 0xFFu;
            tx_bytes(&bad, 1);
        }
    }
}
