"""QEMU as a board: the bootloader at the start of code memory and (unless bootloader_only) the board
app at its offset, UART0 on a loopback TCP port that pyserial opens as socket://127.0.0.1:PORT.

QEMU starts with ``-serial tcp:127.0.0.1:PORT,server=on,wait=on,nodelay=on``: the machine waits for
the first client, and later clients may connect again (one at a time). A guest reset (RESET request,
power-cut test) reloads the bootloader image and keeps the rest of code memory: the flashed
application and the checkpoint slots survive it, as they would survive a reset on a board.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..build import require_tool
from ..errors import PockError
from ..qemu import ICOUNT_SHIFT
from ..targets import get_target
from . import firmware
from .image import load_image


def _die_with_parent() -> None:
    """Linux: QEMU gets SIGTERM when the process that started it dies, however it dies."""
    try:

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def emulator_command(target: str, port: int, boot_elf: Path, app_elf: Path | None, icount: bool = False) -> list[str]:
    t = get_target(target)
    if t.qemu_machine is None:
        raise PockError(f"{t.name} is a real board; emulate runs the QEMU targets: qemu-m3, qemu-m4, qemu-m7, "
                        f"qemu-m33, qemu-m55")
    cmd = [require_tool("qemu-system-arm"), "-M", t.qemu_machine, "-nographic", "-monitor", "none",
           "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(Path(boot_elf).resolve())]
    if icount:  # exact instruction counts from the profile timer, as pockmcu.qemu.run(profile=True)
        cmd += ["-icount", f"shift={ICOUNT_SHIFT},align=off,sleep=off"]
    if app_elf is not None:
        # the flat image (flash contents only): the ELF's RAM segments would overlap the bootloader's
        base, image = load_image(app_elf)
        bin_path = Path(app_elf).with_suffix(".flash.bin")
        if not bin_path.is_file() or bin_path.read_bytes() != image:
            bin_path.write_bytes(image)
        cmd += ["-device", f"loader,file={bin_path.resolve()},addr=0x{base:x},force-raw=on"]
    return cmd


class Emulator:
    """A running QEMU board. Use as a context manager; .url is the pyserial URL of UART0.

    profile=True: the board app built with PROFILE=1, QEMU under -icount, so that PROFILE's readings
    convert to exact instruction counts (Client.run_samples(..., profile=True, icount=True))."""

    def __init__(self, out, target: str = "qemu-m4", port: int | None = None, bootloader_only: bool = False,
                 app_elf: Path | None = None, console=None, profile: bool = False):
        self.target = get_target(target).name
        if get_target(target).qemu_machine is None:
            raise PockError(f"{self.target} is a real board; emulate runs the QEMU targets: qemu-m3, qemu-m4, "
                            f"qemu-m7, qemu-m33, qemu-m55")
        self.boot_elf = firmware.build_bootloader(out, self.target)
        self.app_elf = None if bootloader_only else (app_elf or firmware.build_app(out, self.target, profile))
        self.port = port or free_port()
        if port and port_in_use(port):
            raise PockError(f"--port {port}: 127.0.0.1:{port} is already in use")
        self.url = f"socket://127.0.0.1:{self.port}"
        self.cmd = emulator_command(self.target, self.port, self.boot_elf, self.app_elf, icount=profile)
        self.log = console if console is not None else tempfile.TemporaryFile()
        self.proc = None

    def start(self, ready_timeout: float = 10.0) -> "Emulator":
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent)
        end = time.monotonic() + ready_timeout
        while not port_in_use(self.port):          # QEMU is listening once the port is taken
            if self.proc.poll() is not None:
                raise PockError(f"QEMU exited with status {self.proc.returncode} before listening on "
                                f"127.0.0.1:{self.port}: {self.console().strip()[:200]}")
            if time.monotonic() > end:
                self.stop()
                raise PockError(f"QEMU did not listen on 127.0.0.1:{self.port} within {ready_timeout:g} s")
            time.sleep(0.02)
        return self

    def console(self) -> str:
        if hasattr(self.log, "seek"):
            try:
                self.log.seek(0)
                return self.log.read().decode(errors="replace")
            except Exception:
                return ""
        return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class HostBoard:
    """The board runtime compiled for this machine (firmware/proto/host_harness.c: the same protocol
    handler, checkpoint code and simulated flash, the generated model at -O2) behind a loopback TCP
    port, as a board without QEMU: fast, for the protocol's tests and benchmarks. .url is the pyserial
    URL. One connection at a time; the device keeps running (and its state) between connections."""

    def __init__(self, out, build_dir=None, port: int | None = None):
        self.out = Path(out)
        dest = Path(build_dir) if build_dir is not None else self.out / "build" / "host-board"
        self.exe = firmware.build_host_harness(self.out, dest, sanitize=False, optimize=True)
        self.port = port or free_port()
        if port and port_in_use(port):
            raise PockError(f"--port {port}: 127.0.0.1:{port} is already in use")
        self.url = f"socket://127.0.0.1:{self.port}"
        self.proc = None
        self.srv = None
        self.conn = None
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def start(self) -> "HostBoard":
        self.proc = subprocess.Popen([str(self.exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0, preexec_fn=_die_with_parent)
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", self.port))
        self.srv.listen(1)
        for target in (self._accept, self._from_device):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def _from_device(self) -> None:
        out = self.proc.stdout
        while True:
            try:
                data = out.read1(65536) if hasattr(out, "read1") else out.read(65536)
            except (OSError, ValueError):
                return
            if not data:
                return
            with self.lock:
                conn = self.conn
            if conn is not None:          # nobody connected: the bytes go nowhere, as on a UART
                try:
                    conn.sendall(data)
                except OSError:
                    pass

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                old, self.conn = self.conn, conn
            if old is not None:
                old.close()
            try:
                while data := conn.recv(65536):
                    self.proc.stdin.write(data)
            except (OSError, ValueError):
                pass
            with self.lock:
                if self.conn is conn:
                    self.conn = None
            conn.close()

    def stop(self) -> None:
        if self.srv is not None:
            try:
                self.srv.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.srv.close()
        with self.lock:
            conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()      # end of input: the runtime ends
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for t in self.threads:
            t.join(timeout=2)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
