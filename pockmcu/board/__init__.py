"""Driving a board over a serial line: the board runtime's framed protocol (protocol.py, client.py),
the AN3155 bootloader host side (bootloader.py), firmware builds (firmware.py), QEMU as a board
(emulate.py) and the `pockmcu emulate | flash | train | pull | monitor` commands (cli.py).

The wire format is documented frame by frame in firmware/PROTOCOL.md."""
