"""A loopback TCP proxy that damages the bytes going through it, each way: with probability `rate`
each byte is dropped, duplicated or corrupted (one of the three at random). Seeded; the gaps between
damaged bytes are drawn from the geometric distribution, so the cost is per damaged byte, not per byte.

Sits between the host client and a device on a socket (``pockmcu emulate``'s QEMU or HostBoard):
``LossyProxy(upstream_port, 0.01).url`` is the pyserial URL to open. Used by the tests of the
protocol's exactly-once rule and by ``python -m pockmcu.bench --serial``.
"""

from __future__ import annotations

import math
import random
import socket
import threading


class _Damage:
    """One direction's damage: the positions and kinds of damaged bytes, independent of how the
    stream is cut into reads."""

    def __init__(self, rate: float, seed: int):
        self.rate = rate
        self.rng = random.Random(seed)
        self.counts = dict(bytes=0, drop=0, dup=0, corrupt=0)
        self.gap = self._next_gap()

    def _next_gap(self) -> int:
        if self.rate <= 0:
            return 1 << 62
        if self.rate >= 1:
            return 0
        return int(math.log(1.0 - self.rng.random()) / math.log(1.0 - self.rate))

    def apply(self, data: bytes) -> bytes:
        self.counts["bytes"] += len(data)
        out = bytearray()
        i = 0
        while self.gap < len(data) - i:
            j = i + self.gap
            out += data[i:j]
            b = data[j]
            kind = self.rng.choice(("drop", "dup", "corrupt"))
            self.counts[kind] += 1
            if kind == "dup":
                out += bytes([b, b])
            elif kind == "corrupt":
                out.append(b ^ self.rng.randrange(1, 256))
            i = j + 1
            self.gap = self._next_gap()
        self.gap -= len(data) - i
        out += data[i:]
        return bytes(out)


class LossyProxy:
    """TCP proxy on 127.0.0.1 to 127.0.0.1:upstream_port; one client connection at a time (a new one
    replaces the old). .counts: per direction (to_device, to_host) the bytes and the damage done."""

    def __init__(self, upstream_port: int, rate: float, seed: int = 0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.damage = {"to_device": _Damage(rate, seed * 2 + 1), "to_host": _Damage(rate, seed * 2 + 2)}
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.url = f"socket://127.0.0.1:{self.port}"
        self.socks: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    @property
    def counts(self) -> dict:
        return {d: dict(v.counts) for d, v in self.damage.items()}

    def damaged(self) -> int:
        """Bytes dropped, duplicated or corrupted so far, both ways."""
        return sum(c[k] for c in self.counts.values() for k in ("drop", "dup", "corrupt"))

    def _pump(self, src, dst, direction):
        dmg = self.damage[direction]
        try:
            while data := src.recv(65536):
                with self.lock:
                    data = dmg.apply(data)
                if data:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self):
        while True:
            try:
                client, _ = self.srv.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks += [client, up]
            for args in ((client, up, "to_device"), (up, client, "to_host")):
                t = threading.Thread(target=self._pump, args=args, daemon=True)
                t.start()
                self.threads.append(t)

    def close(self):
        try:
            self.srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.srv.close()
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for t in self.threads:
            t.join(timeout=2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
