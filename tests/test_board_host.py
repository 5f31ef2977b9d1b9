"""The board runtime without QEMU: the frame format, the firmware's frame parser and protocol handler
compiled for the host and fuzzed, the exhaustive power-cut proof of the checkpoint code, flash
layouts, firmware images and builds for every board."""

from __future__ import annotations

import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from pockmcu.board import cobs, firmware
from pockmcu.board import protocol as P
from pockmcu.board.image import load_image
from pockmcu.errors import PockError
from pockmcu.targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def digits_out(tmp_path_factory):
    from pockmcu import digits
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size

    c = compile_model(digits.model_path(), ram=parse_size("256KB"), train=TrainOptions(spec=digits.spec_json("sparse")))
    return write_project(c, tmp_path_factory.mktemp("board_host") / "digits")


# ---------------------------------------------------------------- framing


def test_cobs_round_trip_and_edges():
    rng = random.Random(0)
    cases = [b"", b"\x00", b"\x00\x00", b"\x11\x22\x00\x33", bytes(range(1, 255)), bytes(range(1, 256)),
             b"\x01" * 254 + b"\x00", b"\x01" * 508]
    cases += [bytes(rng.choice([0, 1, 255, rng.randrange(256)]) for _ in range(rng.randrange(1200)))
              for _ in range(300)]
    for d in cases:
        e = cobs.encode(d)
        assert 0 not in e and cobs.decode(e) == d
        assert len(e) <= len(d) + len(d) // 254 + 1
    assert cobs.encode(b"\x11\x22\x00\x33") == b"\x03\x11\x22\x02\x33"
    assert cobs.encode(bytes(range(1, 255))) == b"\xff" + bytes(range(1, 255))   # no empty block after 254
    for bad in (b"\x05\x01", b"\x00", b"\x02\x00"):
        with pytest.raises(ValueError):
            cobs.decode(bad)


def test_frames_and_resynchronisation():
    f = P.encode_frame(P.TRAIN, 0x1234, b"\x00payload\x00")
    assert f[0] == 0 and f[-1] == 0 and 0 not in f[1:-1]
    body = cobs.decode(f[1:-1])
    assert body[:3] == bytes([P.TRAIN, 0x34, 0x12]) and struct.unpack("<I", body[-4:])[0] == cobs.crc32(body[:-4])
    d = P.Deframer()
    stream = b"\x13\x37garbage" + f + b"\x00\x00" + b"\xff" * 2000 + b"\x00" + f[:-3] + f + P.encode_frame(1, 7)
    items = d.feed(stream)
    kinds = [("frame", x.type, x.seq) if isinstance(x, P.Frame) else ("error", x.code) for x in items]
    assert kinds[3][0] == "error"            # a cut frame: bad COBS or bad CRC, then the next one is fine
    kinds[3] = ("error", "cut")
    assert kinds == [("error", P.E_COBS), ("frame", P.TRAIN, 0x1234), ("error", P.E_TOO_LONG),
                     ("error", "cut"), ("frame", P.TRAIN, 0x1234), ("frame", 1, 7)]


# ---------------------------------------------------------------- checkpoints: exhaustive power cuts


def test_checkpoint_survives_a_power_cut_at_every_byte(tmp_path):
    exe = tmp_path / "ckpt_sim"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'firmware'}",
                    str(ROOT / "firmware" / "proto" / "ckpt_sim.c"), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"cuts=(\d+) restored_previous=(\d+) restored_new=(\d+) resaves=(\d+) failures=(\d+)", r.stdout)
    cuts, prev, new, resaves, failures = map(int, m.groups())
    print(r.stdout.strip())
    assert failures == 0
    assert cuts > 150_000 and prev > 100_000 and new > 0 and resaves > 1000


# ---------------------------------------------------------------- the firmware's parser, fuzzed


def _payload_for(t: int, rng: random.Random) -> bytes:
    rb = lambda n: bytes(rng.randrange(256) for _ in range(n))  # noqa: E731
    if t == P.TRAIN:
        if rng.random() < 0.8:
            return struct.pack("<Ii", rng.randrange(1 << 32), rng.randrange(-2, 12)) + rb(rng.choice([64, 64, 0, 5]))
        return rb(rng.randrange(80))
    if t == P.READ_PARAMS:
        off = rng.choice([0, rng.randrange(2700), rng.randrange(1 << 32)])
        return struct.pack("<IH", off, rng.choice([1, 16, 600, 1020, 1021, rng.randrange(1 << 16)]))[:rng.choice([6, 6, 6, 3])]
    if t == P.WRITE_PARAMS:
        return struct.pack("<I", rng.choice([0, rng.randrange(2700), 0xFFFFFFF0])) + rb(rng.randrange(200))
    if t == P.SET_LR:
        return struct.pack("<f", rng.choice([0.001, 0.0, -1.0, float("nan"), float("inf"), 1e7]))
    if t == P.SAVE:
        return b"" if rng.random() < 0.9 else rb(rng.choice([1, 8]))   # (4 bytes = the power-cut hook: not here)
    if t == P.SET_SEED:
        return rb(rng.choice([4, 4, 2]))
    if t == P.STAGE_INPUT:
        return struct.pack("<I", rng.choice([0, 32, 63, 64, 1000])) + rb(rng.randrange(70))
    if t == P.INFER:
        return rb(rng.choice([64, 64, 0, 10]))
    if t == P.PING:
        return rb(rng.choice([0, 10, 1024]))
    if t == P.XFER_BEGIN:
        if rng.random() < 0.5:                          # a valid one (the CRC only matches by chance)
            return P.xfer_begin(rng.choice([1, 2, 3]), P.X_TRAIN, 16, 68, rng.randrange(1 << 32))
        if rng.random() < 0.8:
            kind = rng.choice([P.X_TRAIN, P.X_INFER, P.X_PARAMS, 0, 9])
            total = rng.choice([68, 64, rng.randrange(1, 2700), 0, 1 << 31])
            return P.xfer_begin(rng.choice([1, 2, 3]), kind, rng.choice([16, 24, 1016, 1017, 0]), total,
                                rng.randrange(1 << 32), rng.choice([0, 0, rng.randrange(2700), 0xFFFFFFF0]))
        return rb(rng.choice([19, 21, 0]))
    if t == P.XFER_CHUNK:
        return struct.pack("<II", rng.choice([1, 2, 3]), rng.choice([0, 0, 16, 24, 48, 64, rng.randrange(1 << 32)])) + \
            rb(rng.choice([16, 16, 24, 20, 4, 0, 1016]))
    if t == P.XFER_COMMIT:
        return struct.pack("<I", rng.choice([1, 2, 3])) + rb(rng.choice([0, 4, 4, 1]))
    if t == P.READ_OUTPUT:
        return struct.pack("<IH", rng.choice([0, 5, 10, 1 << 31]), rng.choice([1, 10, 11, 1021]))[:rng.choice([6, 6, 3])]
    return rb(rng.choice([0, 0, 3, 40]))


def _fuzz_stream(rng: random.Random, n: int) -> bytes:
    common = [P.INFO, P.STATS, P.INFER, P.TRAIN, P.READ_PARAMS, P.WRITE_PARAMS, P.SAVE, P.LOAD, P.SET_SEED,
              P.SET_LR, P.STAGE_INPUT, P.CLEAR_STATS, P.PING, P.XFER_BEGIN, P.XFER_CHUNK, P.XFER_CHUNK,
              P.XFER_COMMIT, P.READ_OUTPUT]
    rare = [P.RESET, P.BOOTLOADER, P.PROFILE, 0x00, 0x11, 0x42, 0x7E, P.ERROR, 0x81, 0x84, 0xFF]
    parts, last_valid = [], None
    for _ in range(n):
        k = rng.random()
        if k < 0.40 or last_valid is None:
            t = rng.choice(common) if rng.random() < 0.97 else rng.choice(rare)
            seq = rng.choice([rng.randrange(0xFFFF), rng.randrange(0xFFFF), P.SEQ_NONE]) if rng.random() < 0.02 \
                else rng.randrange(0xFFFF)
            frame = P.encode_frame(t, seq, _payload_for(t, rng))
            last_valid = frame
            parts.append(frame)
        elif k < 0.48:
            parts.append(last_valid)                       # an exact retransmission
        elif k < 0.85:                                     # a damaged frame
            body = bytearray(last_valid[1:-1] if rng.random() < 0.5 else
                             P.encode_frame(rng.choice(common), rng.randrange(0xFFFF),
                                            _payload_for(rng.choice(common), rng))[1:-1])
            for _ in range(rng.randrange(1, 5)):
                op = rng.randrange(6)
                i = rng.randrange(len(body))
                if op == 0:
                    body[i] ^= 1 << rng.randrange(8)
                elif op == 1:
                    body[i] = rng.randrange(256)
                elif op == 2:
                    body.insert(i, rng.randrange(256))
                elif op == 3 and len(body) > 1:
                    del body[i]
                elif op == 4:
                    del body[rng.randrange(len(body)):]
                    if not body:
                        body.append(rng.randrange(1, 256))
                else:
                    body[i:i] = body[i:i + rng.randrange(1, 9)]
            parts.append(b"\x00" + bytes(body) + b"\x00")
        elif k < 0.97:
            parts.append(b"\x00" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 120))) + b"\x00")
        else:
            parts.append(b"\x00" + bytes(rng.randrange(1, 256) for _ in range(rng.randrange(P.MAX_ENCODED + 1, 3000)))
                         + b"\x00")
    return b"".join(parts)


def _expected(stream: bytes) -> list[tuple]:
    """What the device must answer to each frame between delimiters, in order."""
    exp = []
    for chunk in stream.split(b"\x00"):
        if not chunk:
            continue
        try:
            f = P.decode_frame(chunk)
        except P.FrameError as e:
            exp.append(("frame_error", e.code))
            continue
        exp.append(("request", f.type, f.seq, cobs.crc32(P.pack(f.type, f.seq, f.payload)[:-4])))
    return exp


def test_fuzzed_frames_each_get_one_answer(digits_out, tmp_path):
    exe = firmware.build_host_harness(digits_out, tmp_path / "harness", sanitize=True)
    rng = random.Random(2024)
    stream = _fuzz_stream(rng, 12_000)
    r = subprocess.run([str(exe)], input=stream, capture_output=True, timeout=240)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert b"runtime error" not in r.stderr and b"ERROR: AddressSanitizer" not in r.stderr
    answers = P.Deframer().feed(r.stdout)
    assert all(isinstance(a, P.Frame) for a in answers), "the device sent a damaged frame"
    exp = _expected(stream)
    assert len(answers) == len(exp), (len(answers), len(exp))
    last, last_answer = None, None
    counts = dict(frame_errors=0, refused=0, answered=0, repeats=0, transfer=0, transfer_ok=0)
    for e, a in zip(exp, answers):
        if e[0] == "frame_error":                        # every bad frame: an error frame
            assert a.type == P.ERROR and a.seq == P.SEQ_NONE and a.error_code == e[1], (e, a)
            counts["frame_errors"] += 1
            continue
        _, t, seq, crc = e
        if t & P.RESPONSE or t == P.ERROR or seq == P.SEQ_NONE:
            assert a.type == P.ERROR and a.error_code == P.E_UNKNOWN_TYPE and a.seq == seq, (e, a)
            counts["refused"] += 1
            continue
        assert a.seq == seq and a.type in (t | P.RESPONSE, P.ERROR), (e, a)
        if t in P.TRANSFER:                              # executed every time (exactly once: by their id)
            counts["transfer"] += 1
            counts["transfer_ok"] += a.type == t | P.RESPONSE
            continue
        if t in P.IDEMPOTENT:
            continue
        if last == (seq, t, crc):                        # a retransmission: the same answer, not applied again
            assert a == last_answer, (e, a, last_answer)
            counts["repeats"] += 1
        else:
            last, last_answer = (seq, t, crc), a
            counts["answered"] += 1
        if t in (P.RESET, P.BOOTLOADER) and a.type != P.ERROR:
            last = None                                  # the device rebooted: it remembers nothing
    print(counts, r.stderr.decode().strip().splitlines()[-1])
    assert counts["frame_errors"] > 3000 and counts["repeats"] > 300 and counts["answered"] > 2000
    assert counts["transfer"] > 1000 and counts["transfer_ok"] > 100


def test_training_answers_repeat_without_applying(digits_out, tmp_path):
    """The same TRAIN frame three times: one step; a new seq: the next step."""
    exe = firmware.build_host_harness(digits_out, tmp_path / "harness", sanitize=False)
    train = P.encode_frame(P.TRAIN, 10, struct.pack("<Ii", 0, 3) + bytes(64))
    stream = P.encode_frame(P.SET_SEED, 9, struct.pack("<I", 1)) + train * 3 + \
        P.encode_frame(P.TRAIN, 11, struct.pack("<Ii", 1, 3) + bytes(64)) + P.encode_frame(P.STATS, 12) + \
        P.encode_frame(P.PROFILE, 13) * 2 + P.encode_frame(P.STATS, 14)
    r = subprocess.run([str(exe)], input=stream, capture_output=True, timeout=60)
    a = P.Deframer().feed(r.stdout)
    steps = [P.TrainResult.parse(x.payload).steps for x in a[1:5]]
    assert steps == [1, 1, 1, 2]
    st = P.Stats.parse(a[5].payload)
    assert st.steps == 2 and st.api_steps == 2 and st.duplicates == 2
    # PROFILE changes nothing: without PROFILE=1 it is refused each time, never answered from memory
    assert [(x.type, x.seq, x.error_code) for x in a[6:8]] == [(P.ERROR, 13, P.E_UNSUPPORTED)] * 2
    assert "PROFILE=1" in a[6].error_text and P.Stats.parse(a[8].payload).duplicates == 2


# ---------------------------------------------------------------- layouts, images, builds


@pytest.mark.parametrize("target", list(TARGETS))
def test_flash_layouts(target):
    lay = firmware.layout_for(target, 2632)
    end = lay.flash_base + lay.flash_size
    assert lay.app_base + lay.app_bytes == lay.ckpt_base
    assert lay.ckpt_base + 2 * lay.slot_bytes <= end
    assert lay.slot_bytes >= firmware.ckpt_need(2632)
    assert (lay.ckpt_base - lay.flash_base) % lay.sector_bytes == 0 and lay.slot_bytes % lay.sector_bytes == 0
    if TARGETS[target].is_qemu:
        assert lay.app_base == lay.flash_base + firmware.APP_OFFSET and lay.pid is not None
    with pytest.raises(PockError):
        firmware.layout_for(target, 64 * 1024 * 1024)


def test_flash_maps_agree_with_layouts():
    from pockmcu.board.bootloader import flash_map

    for target, pid in firmware.QEMU_PIDS.items():
        m = flash_map(pid, 2632)
        lay = firmware.layout_for(target, 2632)
        assert (m.app_base, m.app_limit, m.target) == (lay.app_base, lay.ckpt_base, target)
        assert m.pages_for(lay.app_base, lay.app_base + 1) == [firmware.APP_OFFSET // 4096]
    f7 = flash_map(0x449, 2632)
    assert f7.app_limit == 0x08080000 and f7.pages_for(0x08000000, 0x08021000) == [0, 1, 2, 3, 4]
    with pytest.raises(PockError, match="no flash map"):
        flash_map(0x123)


@pytest.mark.parametrize("target", ["qemu-m4", "stm32f746g-disco", "nucleo-h743zi", "nrf52840-dk", "rp2350"])
def test_board_app_builds_for_every_kind_of_board(digits_out, target):
    elf = firmware.build_app(digits_out, target)
    lay = firmware.layout_for(target, 2632)
    base, image = load_image(elf, flash=(lay.flash_base, lay.flash_base + lay.flash_size))
    assert base == lay.app_base and base + len(image) <= lay.ckpt_base
    # the ELF's flash contents are exactly what objcopy puts in the .bin
    assert image == elf.with_suffix(".bin").read_bytes()
    cfg = (elf.parent / "board_config.h").read_text()     # in the build's own directory
    assert not (digits_out / "firmware" / "board_config.h").exists()
    assert f'"{lay.flash_impl}"' in cfg and firmware.model_hash(digits_out).hex()[:2].upper() in cfg.upper()


def test_bootloader_is_small_and_refuses_real_boards(digits_out):
    elf = firmware.build_bootloader(digits_out, "qemu-m4")
    base, image = load_image(elf)
    assert base == 0 and len(image) < firmware.APP_OFFSET
    with pytest.raises(PockError, match="ROM"):
        firmware.build_bootloader(digits_out, "stm32f746g-disco")


def test_bad_images(tmp_path):
    with pytest.raises(PockError, match="no such file"):
        load_image(tmp_path / "none.bin", base=0)
    (tmp_path / "a.bin").write_bytes(b"\x01\x02")
    with pytest.raises(PockError, match="address"):
        load_image(tmp_path / "a.bin")
    (tmp_path / "b.elf").write_bytes(b"\x7fELF\x02\x01" + bytes(60))
    with pytest.raises(PockError, match="32-bit"):
        load_image(tmp_path / "b.elf")
