/*
 * pockmcu QEMU bootloader (APP=boot, linked at the start of flash, owns the
 * first BOARD_APP_BASE - BOARD_FLASH_BASE bytes). At reset it starts the
 * application at BOARD_APP_BASE if one is there, unless the application
 * asked to stay (BOOTLOADER request: a magic word in RAM, then reset);
 * otherwise it serves the AN3155 subset on UART0 (bootloader/an3155.c), so
 * `pockmcu flash` writes, verifies and starts an image exactly as it would
 * on an STM32 in its ROM bootloader.
 */
#if defined(__has_include)
    #if !__has_include("board_config.h")
        #error                                                                                                         \
            "board_config.h is missing: build this app with pockmcu flash / pockmcu emulate (pockmcu/board/firmware.py writes it into the build directory)"
    #endif
#endif
#include "board_config.h"

#include "board_sys.h"
#include "port.h"

#include "bootloader/an3155.c"
#include BOARD_FLASH_IMPL

int bl_getc(void) { return board_uart_getc(); }

void bl_putc(uint8_t b) { port_uart_putc(b); }

void bl_go(uint32_t addr)
{
    /* let the ACK leave the UART (QEMU: immediate), then start the image */
    board_start_image(addr);
}

void board_power_cut(void) { board_system_reset(); }

int main(void)
{
    volatile uint32_t *magic = (volatile uint32_t *)(uintptr_t)BOARD_BOOT_MAGIC_ADDR;
    int stay = *magic == BOARD_BOOT_MAGIC;
    *magic = 0u;
    if (!stay && bl_image_valid(BOARD_APP_BASE))
    {
        board_start_image(BOARD_APP_BASE);
    }
    board_uart_init();
    bl_serve();
}
