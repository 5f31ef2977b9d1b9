#include "semihost.h"

#define SYS_OPEN 0x01
#define SYS_CLOSE 0x02
#define SYS_WRITE0 0x04
#define SYS_WRITE 0x05
#define SYS_READ 0x06
#define SYS_EXIT 0x18
#define SYS_EXIT_EXTENDED 0x20
#define ADP_Stopped_ApplicationExit 0x20026u

static int sh_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static uint32_t sh_strlen(const char *s)
{
    uint32_t n = 0;
    while (s[n] != '\0')
    {
        n++;
    }
    return n;
}

int sh_open(const char *path, int mode)
{
    uint32_t args[3];
    args[0] = (uint32_t)(uintptr_t)path;
    args[1] = (uint32_t)mode;
    args[2] = sh_strlen(path);
    return sh_call(SYS_OPEN, args);
}

int sh_close(int fd)
{
    uint32_t args[1];
    args[0] = (uint32_t)fd;
    return sh_call(SYS_CLOSE, args);
}

int sh_read(int fd, void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)fd;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return sh_call(SYS_READ, args);
}

int sh_write(int fd, const void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)fd;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return sh_call(SYS_WRITE, args);
}

void sh_write0(const char *s) { sh_call(SYS_WRITE0, s); }

void sh_exit(int status)
{
    uint32_t args[2];
    args[0] = ADP_Stopped_ApplicationExit;
    args[1] = (uint32_t)status;
    sh_call(SYS_EXIT_EXTENDED, args);
    /* A host without SYS_EXIT_EXTENDED: plain SYS_EXIT (status lost). */
    sh_call(SYS_EXIT, (const void *)(uintptr_t)(status == 0 ? ADP_Stopped_ApplicationExit : 0x20023u));
    for (;;)
    {
    }
}
