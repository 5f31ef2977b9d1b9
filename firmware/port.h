/*
 * pockmcu port layer: the few things the runtime needs from a board or a QEMU
 * machine. Each board is one file in firmware/ports/ implementing this header
 * (plus one make fragment in firmware/targets/ naming its core flags, memory
 * map and port file).
 */
#ifndef POCKMCU_PORT_H
#define POCKMCU_PORT_H

#include <stdint.h>

/* Called once from Reset_Handler after .data/.bss are set up, before main():
 * clocks (if any), the UART and the free-running timer. */
void port_init(void);

/* UART (8N1). putc blocks until the byte is queued; getc blocks until a byte
 * arrives and returns it (0..255), or returns -1 if the port has no UART. */
void port_uart_putc(int c);
int port_uart_getc(void);

/* Human-readable diagnostics (faults, asserts, app errors): semihosting on
 * the QEMU machines, the UART on real boards. */
void port_console_puts(const char *s);

/* Free-running counter that counts UP and wraps modulo 2^32 (down-counting
 * hardware is inverted by the port), and its frequency in Hz. */
uint32_t port_timer_read(void);
uint32_t port_timer_hz(void);

/* Leave the program with a status (0 = success): semihosting SYS_EXIT on QEMU
 * (QEMU's exit status becomes `status`), parks the core on a real board. */
void port_exit(int status) __attribute__((noreturn));

/* Stack high-water mark in bytes (from the painted stack; see startup.c) and
 * the stack size reserved by the linker script. */
uint32_t port_stack_used(void);
uint32_t port_stack_size(void);

/* Helpers shared by the ports and the apps (startup.c). */
void port_console_hex(const char *label, uint32_t value);

#endif
