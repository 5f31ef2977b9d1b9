/*
 * Minimal ARM semihosting (bkpt 0xab): host file I/O and exit without newlib
 * stdio or a heap. Needs a debugger or QEMU with
 * `-semihosting-config enable=on,target=native`; without one, every call
 * faults.
 */
#ifndef POCKMCU_SEMIHOST_H
#define POCKMCU_SEMIHOST_H

#include <stdint.h>

/* fopen()-style modes for sh_open. */
#define SH_MODE_R 0
#define SH_MODE_RB 1
#define SH_MODE_W 4
#define SH_MODE_WB 5
#define SH_MODE_AB 9

/* Returns a handle >= 0, or -1. */
int sh_open(const char *path, int mode);
int sh_close(int fd);
/* Return the number of bytes NOT transferred (0 = all), or -1 on error. */
int sh_read(int fd, void *buf, uint32_t len);
int sh_write(int fd, const void *buf, uint32_t len);
/* Write a NUL-terminated string to the debugger console. */
void sh_write0(const char *s);
/* SYS_EXIT_EXTENDED with ADP_Stopped_ApplicationExit (0x20026) and the status
 * as subcode: QEMU exits with `status`. */
void sh_exit(int status) __attribute__((noreturn));

#endif
