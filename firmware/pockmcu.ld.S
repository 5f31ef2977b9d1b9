/*
 * pockmcu linker script template, preprocessed per target by the Makefile:
 *   arm-none-eabi-cpp -P -undef -x c -DFLASH_ORIGIN=.. -DFLASH_LENGTH=..
 *     -DRAM_ORIGIN=.. -DRAM_LENGTH=.. -DSTACK_BYTES=..
 *     -DPART_FLASH_BYTES=.. -DPART_RAM_BYTES=.. pockmcu.ld.S
 * RAM_LENGTH is the user's --ram budget (not the part's size), so an
 * oversized build fails with "region `RAM' overflowed by N bytes".
 *
 * RAM layout (low to high): thread stack (STACK_BYTES, grows down towards
 * the RAM origin and a guard, so an overflow faults instead of corrupting
 * data), handler stack (256 bytes), .data, .bss. No heap: nothing calls
 * malloc.
 */
MEMORY
{
    FLASH (rx)  : ORIGIN = FLASH_ORIGIN, LENGTH = FLASH_LENGTH
    RAM   (rwx) : ORIGIN = RAM_ORIGIN,   LENGTH = RAM_LENGTH
}

ENTRY(Reset_Handler)

SECTIONS
{
    .text :
    {
        KEEP(*(.isr_vector))
        KEEP(*(.embedded_block))  /* RP2350 IMAGE_DEF: must sit in the first 4 KB */
        *(.text .text.*)
        *(.rodata .rodata.*)
        KEEP(*(.init))
        KEEP(*(.fini))
        . = ALIGN(4);
    } > FLASH

    .ARM.extab : { *(.ARM.extab* .gnu.linkonce.armextab.*) } > FLASH
    .ARM.exidx :
    {
        __exidx_start = .;
        *(.ARM.exidx* .gnu.linkonce.armexidx.*)
        __exidx_end = .;
    } > FLASH

    /* Thread stack (PSP; its lowest 32 bytes are an MPU guard on ARMv7-M,
     * PSPLIM covers it on ARMv8-M), then the small handler stack (MSP) that
     * fault reporting runs on even when the thread stack has overflowed. */
    .stack (NOLOAD) :
    {
        . = ALIGN(32);
        __stack_start = .;
        . += STACK_BYTES;
        . = ALIGN(8);
        __stack_top = .;
        __handler_stack_start = .;
        . += 256;
        __handler_stack_top = .;
    } > RAM

    .data :
    {
        . = ALIGN(4);
        __data_start = .;
        *(.data .data.*)
        . = ALIGN(4);
        __data_end = .;
    } > RAM AT > FLASH
    __data_load = LOADADDR(.data);

    .bss (NOLOAD) :
    {
        . = ALIGN(4);
        __bss_start = .;
        *(.bss .bss.* COMMON)
        . = ALIGN(4);
        __bss_end = .;
    } > RAM

    /DISCARD/ : { *(.ARM.attributes.discard) }
}

ASSERT(RAM_LENGTH <= PART_RAM_BYTES, "pockmcu: the RAM budget (RAM_BYTES) is larger than this part's RAM")
ASSERT(FLASH_LENGTH <= PART_FLASH_BYTES, "pockmcu: FLASH_BYTES is larger than this part's flash")
ASSERT(STACK_BYTES >= 256, "pockmcu: STACK_BYTES must be at least 256")
