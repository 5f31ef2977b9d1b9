"""The per-gen report.html renders in a real browser (headless Chromium, Debian package `chromium`,
installed by `make test`) and its SVG arena timeline is drawn: every tensor rectangle has a non-zero
rendered size, and the screenshot has the timeline's colours where the SVG is."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
from conftest import SHARED

KWS = SHARED / "mlperf_kws_dscnn.tflite"
SPEC = '{"bias": {"last": 2}, "weights": [{"layer": -1, "ratio": 1.0}]}'
WIDTH, HEIGHT = 1000, 1400


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is missing: apt-get install chromium (make test installs it)"
    return exe


def browse(page: Path, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    """One headless Chromium run on a local file, isolated from the network and from any profile."""
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars", *mode, page.resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def read_png(path: Path) -> np.ndarray:
    """A minimal PNG decoder (8-bit RGB/RGBA, non-interlaced, all five filters): [H, W, C] uint8."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    w, h, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(w * bpp, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:      # Sub: running sum per channel
            cur = (np.cumsum(line.reshape(w, bpp), axis=0) & 0xFF).reshape(-1)
        elif f == 2:      # Up
            cur = (line + prev) & 0xFF
        else:             # Average, Paeth: sequential along the row
            cur = np.zeros_like(line)
            lb, pb = line.tolist(), prev.tolist()
            cb = [0] * len(lb)
            for i in range(len(lb)):
                a = cb[i - bpp] if i >= bpp else 0
                b = pb[i]
                if f == 3:
                    cb[i] = (lb[i] + ((a + b) >> 1)) & 0xFF
                else:
                    c = pb[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pbb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pbb and pa <= pc else b if pbb <= pc else c
                    cb[i] = (lb[i] + pred) & 0xFF
            cur = np.array(cb, np.int32)
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3]


MEASURE = """<script>
var svg = document.getElementById("timeline"), r = svg.getBoundingClientRect();
var rects = Array.from(svg.querySelectorAll("rect.tensor")).map(function (e) {
  var b = e.getBoundingClientRect(); return [b.width, b.height]; });
document.body.setAttribute("data-measure", JSON.stringify({svg: [r.left, r.top, r.width, r.height], rects: rects}));
</script>"""


def test_report_timeline_is_drawn(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "pockmcu.cli", "gen", str(KWS), "--train", "--update", SPEC,
                        "--ram", "128KB", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = out / "report.html"
    page = report.read_text()
    n_tensors = len(json.loads((out / "plan.json").read_text())["tensors"])
    assert page.count('class="tensor"') == n_tensors > 0

    # The DOM after rendering: the SVG survived parsing and every tensor rectangle has a rendered size.
    measured = tmp_path / "measure.html"
    measured.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = browse(measured, tmp_path, "--dump-dom").stdout
    assert '<svg xmlns="http://www.w3.org/2000/svg" id="timeline"' in dom
    start = dom.index('data-measure="') + len('data-measure="')
    m = json.loads(dom[start:dom.index('"', start)].replace("&quot;", '"'))
    left, top, width, height = m["svg"]
    assert width == 900 and height == 360 and 0 <= left and top + height <= HEIGHT, m["svg"]
    assert len(m["rects"]) == n_tensors
    assert all(w > 0 and h > 0 for w, h in m["rects"]), m["rects"]
    assert sum(w * h for w, h in m["rects"]) > 0.1 * width * height

    # The pixels: the timeline area of a screenshot of the unchanged page is full of tensor colours.
    shot = tmp_path / "shot.png"
    browse(report, tmp_path, f"--screenshot={shot}")
    img = read_png(shot)
    assert img.shape[:2] == (HEIGHT, WIDTH), img.shape
    area = img[int(top):int(top + height), int(left):int(left + width)].astype(int)
    colored = (area.max(axis=2) - area.min(axis=2)) > 60            # palette colours, not white/grey/black
    non_white = (area < 235).any(axis=2)
    assert colored.mean() > 0.05, colored.mean()
    assert non_white.mean() > 0.1, non_white.mean()
    above = img[: max(int(top) - 40, 1)].astype(int)                  # headings and the memory table
    assert ((above.max(axis=2) - above.min(axis=2)) > 60).mean() < 0.01
