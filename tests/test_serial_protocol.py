"""The serial protocol's limits and refusals, and chunked transfers, on the board runtime compiled for
the host (no QEMU): the frame limits PROTOCOL.md states are the code's, every request checks its
payload length, parameter writes keep biases inside the accumulator's range, a chunked transfer is
applied exactly once, and outputs larger than one frame come back in chunks. Then the same runtime
behind a TCP port (HostBoard) and a proxy that drops, duplicates and corrupts 1% of the bytes each
way: every sample applied exactly once, parameters equal to the host simulation byte for byte."""

from __future__ import annotations

import re
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from pockmcu.board import firmware
from pockmcu.board import protocol as P
from pockmcu.board.client import open_board
from pockmcu.board.emulate import HostBoard
from pockmcu.board.proxy import LossyProxy
from pockmcu.train import HostTrainer

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"


def _gen(model, dest, spec=None, ram="512KB"):
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size

    c = compile_model(model, ram=parse_size(ram), train=TrainOptions(spec=spec) if spec else None)
    return write_project(c, dest)


@pytest.fixture(scope="module")
def digits_out(tmp_path_factory):
    from pockmcu import digits

    return _gen(digits.model_path(), tmp_path_factory.mktemp("serial") / "digits", digits.spec_json("sparse"), "256KB")


@pytest.fixture(scope="module")
def harness(digits_out, tmp_path_factory):
    return firmware.build_host_harness(digits_out, tmp_path_factory.mktemp("serial_h"), sanitize=True)


def run(exe, *frames) -> tuple[list[P.Frame], str]:
    """The frames through the host-built runtime -> its answers (all must be intact) and its stderr."""
    r = subprocess.run([str(exe)], input=b"".join(frames), capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0 and "runtime error" not in err and "AddressSanitizer" not in err, err[-3000:]
    answers = P.Deframer().feed(r.stdout)
    assert all(isinstance(a, P.Frame) for a in answers), answers
    return answers, err


def F(t, seq, payload=b""):
    return P.encode_frame(t, seq, payload)


def stats(a: P.Frame) -> P.Stats:
    assert a.type == P.STATS | P.RESPONSE, a
    return P.Stats.parse(a.payload)


# ---------------------------------------------------------------- limits: one number everywhere


def test_frame_limits_are_one_number_in_header_doc_and_python():
    h = (ROOT / "firmware" / "proto" / "frame.h").read_text()
    doc = (ROOT / "firmware" / "PROTOCOL.md").read_text()
    payload = int(re.search(r"#define PK_MAX_PAYLOAD (\d+)u", h).group(1))
    decoded = 3 + payload + 4
    encoded = decoded + decoded // 254 + 1
    assert (P.MAX_PAYLOAD, P.MAX_DECODED, P.MAX_ENCODED) == (payload, decoded, encoded) == (1024, 1031, 1036)
    assert f"payload, 0 to {payload} bytes" in doc
    assert f"{decoded} + {decoded}/254 + 1 = {encoded} bytes" in doc
    assert f"more than {encoded} bytes before a delimiter" in doc
    assert f"decodes to more than {decoded}" in doc
    assert P.XFER_MAX_CHUNK == payload - 8 and f"1..{payload - 8} bytes" in doc
    # the longest frame the host can send is exactly the longest the device takes
    assert len(P.encode_frame(P.PING, 1, b"\x01" * payload)) - 2 <= P.MAX_ENCODED
    with pytest.raises(ValueError):
        P.encode_frame(P.PING, 1, bytes(payload + 1))


def test_over_long_frames_are_too_long_not_too_short(harness):
    d = P.pack(P.PING, 1, b"\x01" * P.MAX_PAYLOAD)
    over = [P.pack(P.PING, 2, bytes(P.MAX_PAYLOAD + k)) for k in (1, 4)]   # zeros: encoded, they fit the buffer
    assert all(len(P.cobs.encode(o)) <= P.MAX_ENCODED for o in over)
    huge = b"\x00" + b"\x01" * (P.MAX_ENCODED + 1) + b"\x00"                    # over the buffer itself
    a, _ = run(harness, b"\x00" + P.cobs.encode(d) + b"\x00", *(b"\x00" + P.cobs.encode(o) + b"\x00" for o in over),
               huge, F(P.PING, 3, b"ok"))
    assert a[0].type == P.PING | P.RESPONSE and len(a[0].payload) == P.MAX_PAYLOAD
    for x in a[1:4]:
        assert (x.type, x.seq, x.error_code, x.error_text) == (P.ERROR, P.SEQ_NONE, P.E_TOO_LONG, "frame too long")
    assert a[4].payload == b"ok"                                              # and it reads on
    for o in over:                                                            # the host's parser agrees
        with pytest.raises(P.FrameError) as e:
            P.decode_frame(P.cobs.encode(o))
        assert e.value.code == P.E_TOO_LONG


# ---------------------------------------------------------------- every request checks its length


def _wrong_lengths():
    """(request, a payload of the wrong length) for every request type; label 4 bytes, input 64."""
    x = bytes(64)
    lab = struct.pack("<i", 3)
    return [
        (P.INFO, b"\x00"), (P.STATS, b"junk"), (P.INFER, bytes(63)), (P.INFER, bytes(65)),
        (P.TRAIN, struct.pack("<I", 1) + lab + x[:-1]), (P.TRAIN, struct.pack("<I", 1)),
        (P.READ_PARAMS, struct.pack("<IH", 0, 4) + b"\x00"), (P.READ_PARAMS, b"\x00" * 5),
        (P.WRITE_PARAMS, struct.pack("<I", 0)), (P.SAVE, b"\x00\x00"), (P.LOAD, b"\x00"),
        (P.SET_SEED, b"\x01\x02"), (P.RESET, b"junk"), (P.SET_LR, struct.pack("<f", 0.1) + b"\x00"),
        (P.STAGE_INPUT, struct.pack("<I", 0)), (P.CLEAR_STATS, b"\x00"), (P.BOOTLOADER, b"\x00"),
        (P.PROFILE, b"\x00\x00"), (P.READ_OUTPUT, struct.pack("<I", 0)),
        (P.XFER_BEGIN, P.xfer_begin(5, P.X_TRAIN, 16, 68, 0)[:-1]), (P.XFER_CHUNK, struct.pack("<II", 5, 0)),
        (P.XFER_COMMIT, b"\x05\x00"),
    ]


def test_every_request_refuses_a_wrong_payload_length(harness):
    cases = _wrong_lengths()
    assert {t for t, _ in cases} == set(P.NAMES) - {P.ERROR, P.PING}     # PING echoes any length
    frames = [F(P.SET_SEED, 1, struct.pack("<I", 4)), F(P.STATS, 2)]
    frames += [F(t, 10 + k, p) for k, (t, p) in enumerate(cases)]
    frames += [F(P.STATS, 100), F(P.READ_PARAMS, 101, struct.pack("<IH", 0, 64))]
    a, err = run(harness, *frames)
    before = stats(a[1])
    for k, (t, p) in enumerate(cases):
        x = a[2 + k]
        assert (x.type, x.seq, x.error_code) == (P.ERROR, 10 + k, P.E_BAD_LENGTH), (P.NAMES[t], len(p), x)
        assert x.payload[1] == t and P.NAMES[t].split("_")[0] in x.error_text, x.error_text
    after = stats(a[-2])
    assert (after.steps, after.seed, after.inferences, after.samples) == (0, 4, 0, 0) == \
        (before.steps, before.seed, before.inferences, before.samples)
    assert "reboots=0" in err                         # neither RESET nor BOOTLOADER acted


def test_reset_with_junk_is_refused_and_a_clean_reset_resets(harness):
    sample = struct.pack("<Ii", 0, 3) + bytes(64)
    a, err = run(harness, F(P.SET_SEED, 1, struct.pack("<I", 9)), F(P.TRAIN, 2, sample),
                 F(P.RESET, 3, b"\x00junk"), F(P.STATS, 4), F(P.RESET, 5), F(P.STATS, 6))
    assert (a[2].type, a[2].error_code, a[2].error_text) == (P.ERROR, P.E_BAD_LENGTH, "RESET takes no payload")
    assert stats(a[3]).steps == 1 and stats(a[3]).seed == 9          # not reset
    assert a[4].type == P.RESET | P.RESPONSE and stats(a[5]).steps == 0 and stats(a[5]).seed == 0
    assert "reboots=1" in err


# ---------------------------------------------------------------- parameter limits


def test_a_bias_near_int32_max_is_refused(digits_out, harness):
    plan = firmware.read_plan(digits_out)
    tr = plan["training"]["trainable"]
    limits = firmware.param_limits(digits_out)
    k = next(i for i, t in enumerate(tr) if t["dtype"] == "int32")
    off = sum(t["bytes"] for t in tr[:k])
    depth = {"conv1/bias": 1 * 1 * 8, "conv2/bias": 3 * 3 * 16, "fc0/bias": 16}   # weights per output channel
    assert [lim for t, lim in zip(tr, limits) if t["dtype"] == "int32"] == \
        [2**31 - 1 - depth[t["tensor"]] * 256 * 128 for t in tr if t["dtype"] == "int32"]
    assert all(lim == -1 for t, lim in zip(tr, limits) if t["dtype"] != "int32")
    lim = limits[k]
    total = sum(t["bytes"] for t in tr)
    big = struct.pack("<i", 2**31 - 100)                  # the accumulator would overflow: undefined behaviour
    data = bytearray(total)
    data[off + 8:off + 12] = struct.pack("<i", -lim - 1)
    frames = [
        F(P.SET_SEED, 1, struct.pack("<I", 0)), F(P.READ_PARAMS, 2, struct.pack("<IH", off, 64)),
        F(P.WRITE_PARAMS, 3, struct.pack("<I", off + 4) + big),
        F(P.WRITE_PARAMS, 4, struct.pack("<I", off + 4) + struct.pack("<i", lim + 1)),
        F(P.WRITE_PARAMS, 5, struct.pack("<I", off + 6) + big[2:]),          # half an element: checked whole
        # a chunked parameter write: the chunk holding the bad bias is refused, nothing of it written
        F(P.XFER_BEGIN, 6, P.xfer_begin(7, P.X_PARAMS, 64, total, zlib.crc32(data))),
        F(P.XFER_CHUNK, 7, P.xfer_chunk(7, 0, data[:64])),
        F(P.READ_PARAMS, 8, struct.pack("<IH", off, 64)),
        # at the limit: accepted; the model still runs
        F(P.WRITE_PARAMS, 9, struct.pack("<I", off + 4) + struct.pack("<ii", lim, -lim)),
        F(P.READ_PARAMS, 10, struct.pack("<IH", off, 64)), F(P.TRAIN, 11, struct.pack("<Ii", 0, 3) + bytes(64)),
    ]
    a, _ = run(harness, *frames)
    orig = a[1].payload[4:]
    for x in a[2:5] + a[6:7]:
        assert (x.type, x.error_code) == (P.ERROR, P.E_BAD_ARG) and "limit" in x.error_text, x
    assert a[5].type == P.XFER_BEGIN | P.RESPONSE
    assert a[7].payload[4:] == orig                       # unchanged
    assert a[8].type == P.WRITE_PARAMS | P.RESPONSE
    assert a[9].payload[4:] == orig[:4] + struct.pack("<ii", lim, -lim) + orig[12:]
    assert a[10].type == P.TRAIN | P.RESPONSE


# ---------------------------------------------------------------- chunked transfers, exactly once


def _train_transfer(xid, sample, chunk, seq0, commit_copies=1, chunk_copies=1):
    frames, seq = [], seq0
    frames.append(F(P.XFER_BEGIN, seq, P.xfer_begin(xid, P.X_TRAIN, chunk, len(sample), zlib.crc32(sample))))
    for pos in range(0, len(sample), chunk):
        seq += 1
        frames += [F(P.XFER_CHUNK, seq, P.xfer_chunk(xid, pos, sample[pos:pos + chunk]))] * chunk_copies
    seq += 1
    frames += [F(P.XFER_COMMIT, seq, struct.pack("<II", xid, 1000 + xid))] * commit_copies
    return frames, seq


def test_duplicated_train_commit_is_applied_once(harness):
    s1 = struct.pack("<i", 3) + bytes(range(64))
    s2 = struct.pack("<i", 5) + bytes(range(64, 128))
    f1, seq = _train_transfer(1, s1, 16, 10, commit_copies=3, chunk_copies=2)   # every chunk and the commit repeated
    f2, seq = _train_transfer(2, s2, 24, seq + 1)
    frames = [F(P.SET_SEED, 1, struct.pack("<I", 1))] + f1 + [
        F(P.XFER_COMMIT, 200, struct.pack("<II", 1, 1001)),                # the commit again, new seq: from memory
        F(P.XFER_BEGIN, 201, P.xfer_begin(1, P.X_TRAIN, 16, len(s1), zlib.crc32(s1))),   # begin of a done one
    ] + f2 + [F(P.STATS, 300), F(P.INFO, 301)]
    a, _ = run(harness, *frames)
    commits = [x for x in a if x.type == P.XFER_COMMIT | P.RESPONSE]
    assert len(commits) == 5
    results = [P.TrainResult.parse(P.parse_commit(x.payload)[2]) for x in commits]
    assert [r.steps for r in results] == [1, 1, 1, 1, 2] and [r.sample_id for r in results] == [1001] * 4 + [1002]
    assert len({x.payload for x in commits[:4]}) == 1                    # the same answer each time
    begin_done = [x for x in a if x.type == P.XFER_BEGIN | P.RESPONSE][1]
    assert P.parse_begin(begin_done.payload)[1] == 1                    # "committed already"
    st = stats(a[-2])
    assert st.steps == 2 and st.api_steps == 2 and st.duplicates == 3 and (st.last_xid, st.last_xid_valid) == (2, True)
    assert P.Info.parse(a[-1].payload).last_xid == 2
    # the same two samples as TRAIN frames: the same parameters (a transfer is a TRAIN, nothing else)
    ref, _ = run(harness, F(P.SET_SEED, 1, struct.pack("<I", 1)), F(P.TRAIN, 2, struct.pack("<I", 1001) + s1),
                 F(P.TRAIN, 3, struct.pack("<I", 1002) + s2), F(P.READ_PARAMS, 4, struct.pack("<IH", 0, 1000)))
    a2, _ = run(harness, *([F(P.SET_SEED, 1, struct.pack("<I", 1))] + f1 + f2 +
                           [F(P.READ_PARAMS, 400, struct.pack("<IH", 0, 1000))]))
    assert a2[-1].payload == ref[-1].payload


def test_transfer_states_and_refusals(harness):
    s = struct.pack("<i", 3) + bytes(range(64))
    crc = zlib.crc32(s)
    frames = [
        F(P.XFER_CHUNK, 1, P.xfer_chunk(9, 0, s[:16])),                                  # no BEGIN
        F(P.XFER_BEGIN, 2, P.xfer_begin(9, P.X_TRAIN, 16, len(s) + 1, crc)),             # wrong total
        F(P.XFER_BEGIN, 3, P.xfer_begin(9, P.X_TRAIN, 1017, len(s), crc)),               # chunk too big
        F(P.XFER_BEGIN, 4, P.xfer_begin(9, 7, 16, len(s), crc)),                         # unknown kind
        F(P.XFER_BEGIN, 5, P.xfer_begin(9, P.X_TRAIN, 16, len(s), crc)),
        F(P.XFER_CHUNK, 6, P.xfer_chunk(9, 16, s[16:32])),                               # out of order
        F(P.XFER_CHUNK, 7, P.xfer_chunk(9, 8, s[8:24])),                                 # not a boundary
        F(P.XFER_CHUNK, 8, P.xfer_chunk(9, 0, s[:15])),                                  # short chunk
        F(P.XFER_CHUNK, 9, P.xfer_chunk(9, 0, s[:16])),
        F(P.XFER_CHUNK, 10, P.xfer_chunk(9, 16, s[16:32])),
        F(P.XFER_COMMIT, 11, struct.pack("<II", 9, 0)),                                  # incomplete
        F(P.XFER_BEGIN, 12, P.xfer_begin(9, P.X_TRAIN, 24, len(s), crc)),                # resume, other size
        F(P.XFER_CHUNK, 13, P.xfer_chunk(9, 24, s[24:48])),
        F(P.XFER_CHUNK, 14, P.xfer_chunk(9, 48, s[48:])),
        F(P.XFER_COMMIT, 15, struct.pack("<I", 9)),                                      # TRAIN needs the id
        F(P.TRAIN, 16, struct.pack("<I", 77) + struct.pack("<i", 1) + bytes(64)),         # overwrites the input
        F(P.XFER_COMMIT, 17, struct.pack("<II", 9, 0)),                                  # CRC mismatch
        F(P.STATS, 18),
    ]
    a, _ = run(harness, *frames)
    codes = [(x.seq, x.error_code) for x in a if x.type == P.ERROR]
    assert codes == [(1, P.E_XFER), (2, P.E_BAD_ARG), (3, P.E_BAD_ARG), (4, P.E_BAD_ARG), (6, P.E_XFER),
                     (7, P.E_XFER), (8, P.E_BAD_LENGTH), (11, P.E_XFER), (15, P.E_BAD_LENGTH), (17, P.E_XFER)]
    assert P.parse_begin(a[11].payload) == (9, 0, 24, 24)          # 32 bytes there: resume at 24
    assert "CRC" in a[16].error_text and stats(a[17]).steps == 1   # only the TRAIN frame trained


@pytest.fixture(scope="module")
def ad_out(tmp_path_factory):
    return _gen(SHARED / "mlperf_ad_autoencoder_floatio.tflite", tmp_path_factory.mktemp("serial_ad") / "ad")


def test_infer_of_an_output_larger_than_one_frame(ad_out, tmp_path):
    from pockmcu.sim import load

    plan = firmware.read_plan(ad_out)
    assert plan["outputs"][0]["bytes"] > P.MAX_PAYLOAD and plan["inputs"][0]["bytes"] > P.MAX_PAYLOAD
    x = np.random.default_rng(3).standard_normal((4, 640)).astype(np.float32)
    want = load(ad_out).invoke(x).reshape(4, -1)
    with HostBoard(ad_out, tmp_path / "hb") as hb:
        c = open_board(hb.url, connect_timeout=5)
        assert c.info.output_bytes == 2560 and not c.info.training
        with pytest.raises(Exception, match="do not fit in one frame"):       # one INFER frame cannot say it
            c.request(P.INFER, b"")
        got = [np.frombuffer(c.infer(x[i].tobytes()), np.float32) for i in range(4)]
        st = c.get_stats()
        c.link.close()
    assert np.array_equal(np.stack(got), want)
    assert st.inferences == 4 and c.stats.transfers == 4


# ---------------------------------------------------------------- through a damaging link


def _lossy_run(out, tmp, xs, ys, rate, seed):
    with HostBoard(out, tmp / "hb") as hb, LossyProxy(hb.port, rate, seed=seed) as px:
        c = open_board(px.url, connect_timeout=5)
        c.set_seed(seed)
        t0 = time.monotonic()
        for k in range(len(xs)):
            r = c.train(k, ys[k].tobytes(), xs[k].tobytes())
            assert r.sample_id == k and r.steps == k + 1
        params = c.read_params(c.info.params_bytes)
        st = c.get_stats()
        elapsed = time.monotonic() - t0
        c.link.close()
        counts = px.counts
    h = HostTrainer(out)
    h.init(seed)
    for k in range(len(xs)):
        h.step(xs[k], ys[k])
    print(f"\n{len(xs)} samples of {xs[0].nbytes} B through {rate:.0%} damage in {elapsed:.1f} s: {c.stats}; "
          f"proxy {counts}; device: {st.duplicates} repeats answered from memory, {st.bad_frames} bad frames")
    return st, params, h.params(), c.stats, counts


def test_lossy_link_small_model_exactly_once(digits_out, tmp_path):
    from pockmcu import digits

    train, _ = digits.datasets()
    n = 50
    st, params, want, link, counts = _lossy_run(digits_out, tmp_path, train.x[:n], train.y[:n].astype(np.int32),
                                                0.01, 21)
    assert st.steps == n and st.api_steps == n and st.samples == n
    assert params == want
    damaged = sum(c[k] for c in counts.values() for k in ("drop", "dup", "corrupt"))
    assert damaged > 30 and link.retransmissions > 20


@pytest.fixture(scope="module")
def vww_out(tmp_path_factory):
    spec = '{"bias": {"last": 1}, "weights": [{"layer": -1}], "optimizer": {"kind": "sgd", "lr": 0.001}}'
    return _gen(SHARED / "mlperf_vww_mobilenetv1_96.tflite", tmp_path_factory.mktemp("serial_vww") / "vww", spec, "1MB")


def test_lossy_link_96x96x3_images_exactly_once(vww_out, tmp_path):
    n = 8
    rng = np.random.default_rng(8)
    xs = rng.integers(-128, 128, (n, 96, 96, 3)).astype(np.int8)
    ys = rng.integers(0, 2, n).astype(np.int32)
    st, params, want, link, counts = _lossy_run(vww_out, tmp_path, xs, ys, 0.01, 8)
    assert st.steps == n and st.api_steps == n and st.samples == n
    assert params == want
    assert link.transfers == n and link.retransmissions > 500 and counts["to_device"]["drop"] > 300
