"""Choose the sparse update under a RAM budget (`gen --train` without `--update`, and `pockmcu plan`).

Candidates (``L`` parameterized layers, counted as in the update spec):

- the biases of the last ``k`` layers, ``k = 1..L`` (one choice of ``k``: the options are nested);
- the weights of each layer ``i`` at input-channel ratio 1/8, 1/4, 1/2 or 1 (one ratio per layer).

A scheme is one ``k`` (or none) plus one ratio (or none) per layer; its expected gain is the sum of its
options' gains (additivity is assumed). Its cost is exact: the scheme is compiled and
``Compiled.ram_needed`` (arena + persistent + stack + runtime) is compared with the budget.

Gains. Without data, a documented prior (``prior_gains``), following the sparse-update results for
tiny training (later layers matter more; biases are cheap and come first; of the weights, the first
pointwise conv of a block contributes most, depthwise filters least):

    depth d = L - 1 - i (0 for the last layer), importance w = 0.8 ** d
    bias of layer i:                 0.25 * w          (0 if the layer has no bias)
    weights of layer i at ratio r:   w * f * sqrt(r)    f = 1.0 for the last layer and for the first
                                                        pointwise (1x1) conv of each block, 0.5 for
                                                        other convs, 0.2 for depthwise convs
    the biases of the last k layers: the sum over those k layers

With calibration data (``measured_gains``): contribution analysis in host simulation. DATA is split
(seeded) into 3/4 train and 1/4 held out; each option alone is generated, built for the host and
trained for one epoch (``train.HostTrainer``), and its gain is the held-out accuracy after that epoch
minus the accuracy before (negative gains count as 0). The search is the same with these gains.

Search (``search``): greedy by gain per byte with exact RAM. Every option is first compiled alone;
``est(option)`` is its RAM above the inference-only build. From the empty scheme, the upgrades
(raise ``k``; raise one layer's ratio) are ranked by added gain / added estimated RAM (ties by a
fixed order); the best-ranked upgrades are compiled in that order (at most ``TRIES`` per round) and
the first whose exact RAM fits is taken. It stops when no upgrade fits. Compiles are cached by spec
and bounded by ``MAX_COMPILES``. Everything is deterministic; the seed only drives the calibration
split and training.
"""

from __future__ import annotations

import html
import json
import math
import multiprocessing
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import jinja2
import markupsafe
import numpy as np

from . import __version__
from .build import build_host_lib
from .codegen import write_project
from .compiler import DEFAULT_STACK_BYTES, RUNTIME_RAM_BYTES, TrainOptions, compile_graph, compile_model, load_and_check
from .errors import PockError
from .ir import Graph
from .ops.base import operand
from .stream import all_candidates
from .train import Data, HostTrainer, load_data
from .training.builder import check_trainable
from .training.fusions import Fusions
from .training.spec import DEFAULT_OPTIMIZER, param_ops

RATIOS = (0.125, 0.25, 0.5, 1.0)
TRIES = 8                # exact compiles per greedy round
MAX_COMPILES = 800       # per search
BIG_RAM = 1 << 40        # compile without a budget check; the search compares with the budget itself


@dataclass(frozen=True)
class Scheme:
    bias_last: int                   # biases of the last k layers (0 = none)
    ratios: tuple                    # per layer: 0 (frozen) or one of RATIOS

    def options(self) -> list[tuple]:
        out = [("bias", self.bias_last)] if self.bias_last else []
        return out + [("w", i, r) for i, r in enumerate(self.ratios) if r]

    def spec(self, optimizer: dict) -> dict:
        n = len(self.ratios)
        bias = "none" if not self.bias_last else "all" if self.bias_last >= n else {"last": self.bias_last}
        weights = [{"layer": i, "ratio": r} for i, r in enumerate(self.ratios) if r]
        return {"bias": bias, "weights": weights or "none", "optimizer": dict(optimizer)}


@dataclass
class Cost:
    ram: int
    arena: int
    persistent: int
    describe: str = ""
    peak: str = ""                   # what sets the arena's peak


@dataclass
class Choice:
    """The chosen scheme for one budget."""
    budget: int
    scheme: Scheme
    spec: dict
    gain: float
    cost: Cost
    gains_source: str                # "prior" or "measured on DATA"

    @property
    def spec_json(self) -> str:
        return json.dumps(self.spec)

    def summary(self) -> str:
        s, parts = self.scheme, []
        n = len(s.ratios)
        if s.bias_last:
            parts.append("all biases" if s.bias_last >= n else f"biases of last {s.bias_last}")
        for i, r in enumerate(s.ratios):
            if r:
                parts.append(f"W{i}" + ("" if r == 1 else f"@{_ratio_text(r)}"))
        return ", ".join(parts)


def _ratio_text(r: float) -> str:
    return {0.125: "1/8", 0.25: "1/4", 0.5: "1/2", 1.0: "1"}.get(r, f"{r:g}")


# -- the model's layers and the prior -------------------------------------------------------


def layer_info(g) -> list[dict]:
    ops = param_ops(g)
    info = []
    for op in ops:
        w = g.t(operand(op, "weights"))
        pointwise = op.kind == "CONV_2D" and len(w.shape) == 4 and w.shape[1] == 1 and w.shape[2] == 1
        info.append(dict(name=op.name, kind=op.kind, pointwise=pointwise,
                         has_bias=bool(operand(op, "bias"))))
    for i, d in enumerate(info):   # the first pointwise conv of each block
        prev = info[i - 1] if i else None
        nxt = info[i + 1] if i + 1 < len(info) else None
        expand = nxt is not None and nxt["kind"] == "DEPTHWISE_CONV_2D"               # MobileNetV2: pw-dw-pw
        after_dw = prev is not None and prev["kind"] == "DEPTHWISE_CONV_2D" and not (
            i >= 2 and info[i - 2].get("first_pw"))                                   # V1 / DS-CNN: dw-pw
        d["first_pw"] = d["pointwise"] and (expand or after_dw)
    return info


def prior_gains(info: list[dict]) -> dict:
    """Expected gain per option (see the module docstring)."""
    n = len(info)
    bias_one, gains = [], {}
    for i, d in enumerate(info):
        w = 0.8 ** (n - 1 - i)
        bias_one.append(0.25 * w if d["has_bias"] else 0.0)
        f = 1.0 if (i == n - 1 or d["first_pw"]) else 0.2 if d["kind"] == "DEPTHWISE_CONV_2D" else 0.5
        for r in RATIOS:
            gains[("w", i, r)] = w * f * math.sqrt(r)
    for k in range(1, n + 1):
        gains[("bias", k)] = sum(bias_one[n - k:])
    return gains


# -- exact costs ----------------------------------------------------------------------------


class Coster:
    """Exact RAM of a scheme by compiling it; cached by spec."""

    def __init__(self, g: Graph, loss: str = "xent", reorder: bool = True, stack: int | None = None,
                 target: str = "qemu-m4", optimizer: dict | None = None, stream: str = "auto",
                 fusions: Fusions = Fusions()):
        self.g, self.loss, self.reorder, self.target, self.stream = g, loss, reorder, target, stream
        self.fusions = fusions
        self.stack = DEFAULT_STACK_BYTES if stack is None else stack
        self.optimizer = dict(optimizer or DEFAULT_OPTIMIZER)
        self.cache: dict[str, Cost] = {}
        self.compiles = 0
        self._candidates = None          # stream.all_candidates(g), computed on first use

    def compiled(self, scheme: Scheme, ram: int = BIG_RAM, stream: str | None = None):
        opts = TrainOptions(spec=json.dumps(scheme.spec(self.optimizer)), loss=self.loss, reorder=self.reorder,
                            fusions=self.fusions)
        return compile_graph(self.g, ram, None, self.stack, self.target, opts, stream or self.stream,
                             stream_candidates=self.candidates(stream or self.stream))

    def candidates(self, stream: str) -> list | None:
        """stream.all_candidates of the graph, computed once for every compile of it (None: not streaming)."""
        if stream == "off":
            return None
        if self._candidates is None:
            self._candidates = all_candidates(self.g)
        return self._candidates

    def __call__(self, scheme: Scheme, budget: int | None = None) -> Cost:
        """The scheme's cost; with ``budget``, as compile_model would build it for that --ram: under
        ``--stream auto`` a scheme that does not fit is costed again streamed as far as it goes."""
        cost = self._cost(scheme, self.stream)
        if budget is not None and cost.ram > budget and self.stream == "auto":
            cost = min(cost, self._cost(scheme, "max"), key=lambda c: c.ram)
        return cost

    def _cost(self, scheme: Scheme, stream: str) -> Cost:
        key = json.dumps([scheme.spec(self.optimizer), stream], sort_keys=True)
        if key not in self.cache:
            if self.compiles >= MAX_COMPILES:
                raise _Exhausted
            self.compiles += 1
            c = self.compiled(scheme, stream=stream)
            self.cache[key] = Cost(ram=c.ram_needed, arena=c.plan.arena_bytes, persistent=c.persistent_ram_bytes,
                                   describe=c.train.spec.describe(), peak=_peak(c))
        return self.cache[key]


class _Exhausted(Exception):
    pass


def _peak(c) -> str:
    """The op at the arena's busiest step and the largest buffers live there, named by the op that
    writes them ("conv1's output")."""
    plan = c.plan
    live = plan.live_bytes()
    if not live:
        return ""
    step = max(range(len(live)), key=lambda s: live[s])
    ops = c.train.schedule if c.train else c.graph.ops
    writer = {}
    for op in ops:
        for t in op.outputs:
            writer.setdefault(t, op.name)
    inputs = set(c.graph.inputs)

    def name(b) -> str:
        for t in b.tensors or [b.name]:
            if t in inputs:
                return "the model input"
            if t in writer:
                return f"{_short(writer[t])}'s {'scratch' if b.kind == 'scratch' else 'output'}"
        return _short(b.name)

    bufs = sorted((b for b in plan.buffers if b.first <= step <= b.last), key=lambda b: (-b.size, b.name))
    names = ", ".join(f"{name(b)} {b.size:,} B" for b in bufs[:3])
    return f"peak at step {step}, {_short(plan.steps[step])}: {names}"


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else "..." + name[-(n - 3):]


# -- measured gains -------------------------------------------------------------------------


def measured_gains(path, info: list[dict], data, seed: int = 0, loss: str = "xent", epochs: int = 1,
                   optimizer: dict | None = None, log=None) -> dict:
    """Contribution analysis: each option alone, trained on 3/4 of DATA in host simulation for one
    epoch; its gain is the held-out accuracy gain. ``data`` is a train.Data."""

    if loss != "xent":
        raise PockError("--calib measures accuracy gains: it needs --loss xent (classification)")
    n = len(data.x)
    if n < 8:
        raise PockError(f"--calib: {n} samples are too few to split into training and held-out parts (need 8)")
    perm = np.random.default_rng(seed).permutation(n)
    cut = n - max(n // 4, 2)
    train, held = (Data(data.x[perm[:cut]], data.y[perm[:cut]]), Data(data.x[perm[cut:]], data.y[perm[cut:]]))
    coster = Coster(load_and_check(path), loss=loss, optimizer=optimizer)
    L = len(info)
    options = [("bias", k) for k in range(1, L + 1) if any(d["has_bias"] for d in info[L - k:])]
    options += [("w", i, r) for i in range(L) for r in RATIOS]
    gains, base = {}, None
    spec_of = [json.dumps(_apply(Scheme(0, (0,) * L), o).spec(coster.optimizer)) for o in options]
    with tempfile.TemporaryDirectory(prefix="pockmcu-calib-") as tmp:
        dirs = [Path(tmp) / f"c{j}" for j in range(len(options))]
        # the first build puts the kernel archive in the cache (build.kernel_archive) ...
        _prepare((str(path), spec_of[0], loss, str(dirs[0])))
        jobs = [(str(path), spec_of[j], loss, str(dirs[j])) for j in range(1, len(options))]
        workers = max(1, min(4, os.cpu_count() or 1))
        if workers > 1 and jobs:                                           # ... the rest link it, in parallel
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                list(pool.map(_prepare, jobs))
        else:
            for job in jobs:
                _prepare(job)
        for opt, out in zip(options, dirs):
            trainer = HostTrainer(out)
            if base is None:
                base = trainer.evaluate(held)
            trainer.train(train, epochs, seed, log=lambda _s: None)
            acc = trainer.evaluate(held)
            gains[opt] = max(acc - base, 0.0)
            if log:
                log(f"calib {_option_text(opt, L)}: held-out accuracy {base:.3f} -> {acc:.3f}")
    for k in range(1, L + 1):
        gains.setdefault(("bias", k), 0.0)
    return gains


def _prepare(job) -> None:
    """Generate one candidate's project and build its host library."""
    path, spec, loss, out = job
    write_project(compile_model(path, BIG_RAM, train=TrainOptions(spec=spec, loss=loss)), out)
    build_host_lib(out)


def _option_text(opt, n: int) -> str:
    if opt[0] == "bias":
        return "all biases" if opt[1] >= n else f"biases of last {opt[1]}"
    return f"W{opt[1]}@{_ratio_text(opt[2])}"


def load_calib(path, model_path, loss: str = "xent"):
    """DATA.npz -> train.Data, checked against the model's input like `sim --train`."""

    if loss != "xent":
        raise PockError("--calib measures accuracy gains: it needs --loss xent (classification)")
    g = load_and_check(model_path)
    t_in, t_out = g.t(g.inputs[0]), g.t(g.outputs[0])
    plan = {"inputs": [{"shape": list(t_in.shape), "dtype": t_in.dtype}],
            "outputs": [{"shape": list(t_out.shape), "dtype": t_out.dtype}], "training": {"loss": loss}}
    return load_data(path, plan, "--calib")


# -- the search -----------------------------------------------------------------------------


def _apply(s: Scheme, opt) -> Scheme:
    if opt[0] == "bias":
        return Scheme(opt[1], s.ratios)
    r = list(s.ratios)
    r[opt[1]] = opt[2]
    return Scheme(s.bias_last, tuple(r))


def scheme_gain(s: Scheme, gains: dict) -> float:
    return sum(gains.get(o, 0.0) for o in s.options())


class Searcher:
    """One model, one gain table; searches any number of budgets with a shared compile cache."""

    def __init__(self, path, loss: str = "xent", reorder: bool = True, stack: int | None = None,
                 target: str = "qemu-m4", calib=None, seed: int = 0, log=None, stream: str = "auto",
                 fusions: Fusions = Fusions()):
        self.path = path
        g = load_and_check(path)
        check_trainable(g, loss)
        self.info = layer_info(g)
        if not self.info:
            raise PockError(f"{g.source}: no CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED layer to train")
        self.L = len(self.info)
        self.coster = Coster(g, loss=loss, reorder=reorder, stack=stack, target=target, stream=stream,
                             fusions=fusions)
        if calib is not None:
            self.gains = measured_gains(path, self.info, calib, seed=seed, loss=loss, log=log)
            self.source = "measured"
        else:
            self.gains = prior_gains(self.info)
            self.source = "prior"
        self.inference_ram = compile_graph(g, BIG_RAM, None, self.coster.stack, target, None, stream,
                                           stream_candidates=self.coster.candidates(stream)).ram_needed
        empty = Scheme(0, (0,) * self.L)
        self.singles = {}              # option -> Cost of the option alone
        for opt in self._all_options():
            self.singles[opt] = self.coster(_apply(empty, opt))
        self.explored: dict[Scheme, tuple[float, Cost]] = {}

    def _all_options(self):
        opts = [("bias", k) for k in range(1, self.L + 1) if any(d["has_bias"] for d in self.info[self.L - k:])]
        return opts + [("w", i, r) for i in range(self.L) for r in RATIOS]

    def _est(self, opt) -> int:
        if opt is None:
            return 0
        return max(self.singles[opt].ram - self.inference_ram, 0)

    def minimum(self, budget: int | None = None) -> tuple[Scheme, Cost]:
        """The scheme with the least RAM; with ``budget``, costed as it would be built for it."""
        empty = Scheme(0, (0,) * self.L)
        opt = min(self.singles, key=lambda o: (self.singles[o].ram, -self.gains.get(o, 0.0), str(o)))
        s = _apply(empty, opt)
        return s, self.coster(s, budget) if budget is not None else self.singles[opt]

    def _moves(self, s: Scheme):
        """Upgrades of s: (option, added gain, added estimated bytes, tie-break order)."""
        out = []
        cur_b = ("bias", s.bias_last) if s.bias_last else None
        for k in range(s.bias_last + 1, self.L + 1):
            o = ("bias", k)
            if o in self.singles:
                out.append((o, self.gains.get(o, 0.0) - (self.gains.get(cur_b, 0.0) if cur_b else 0.0),
                            self._est(o) - self._est(cur_b)))
        for i, r0 in enumerate(s.ratios):
            cur = ("w", i, r0) if r0 else None
            for r in RATIOS:
                if r > r0:
                    o = ("w", i, r)
                    out.append((o, self.gains[o] - (self.gains[cur] if cur else 0.0), self._est(o) - self._est(cur)))
        return [m for m in out if m[1] > 1e-12]

    def search(self, budget: int) -> Choice:
        s = Scheme(0, (0,) * self.L)
        cost = None
        try:
            while True:
                moves = sorted(self._moves(s), key=lambda m: (-m[1] / max(m[2], 64), str(m[0])))
                taken = False
                room = [m for m in moves[TRIES:] if (cost.ram if cost else self.inference_ram) + m[2] <= budget]
                for opt, _dg, _db in moves[:TRIES] + room[:TRIES]:
                    t = _apply(s, opt)
                    c = self.coster(t, budget)
                    self.explored[t] = (scheme_gain(t, self.gains), c)
                    if c.ram <= budget:
                        s, cost, taken = t, c, True
                        break
                if not taken:
                    break
        except _Exhausted:
            pass
        if cost is None:   # nothing with positive gain fits: the smallest scheme, if it fits
            s, cost = self.minimum(budget)
            if cost.ram > budget:
                raise PockError(self.too_small_message(budget))
        return Choice(budget=budget, scheme=s, spec=s.spec(self.coster.optimizer), gain=scheme_gain(s, self.gains),
                      cost=cost, gains_source=self.source)

    def search_all(self, budgets: list[int]) -> list[Choice]:
        """The best scheme per budget; a larger budget never gets less expected gain than a smaller one."""
        out, best = [], None
        for b in sorted(set(budgets)):
            c = self.search(b)
            if best is not None and best.gain > c.gain:
                c = Choice(budget=b, scheme=best.scheme, spec=best.spec, gain=best.gain, cost=best.cost,
                           gains_source=best.gains_source)
            best = c
            out.append(c)
        by = {c.budget: c for c in out}
        return [by[b] for b in budgets]

    def too_small_message(self, budget: int) -> str:
        s, c = self.minimum(budget)
        stack = self.coster.stack

        parts = sorted([(c.arena, f"the arena {c.arena:,} B ({c.peak})"),
                        (c.persistent, f"trainable parameters and optimizer state {c.persistent:,} B"),
                        (stack, f"stack {stack:,} B (--stack)"),
                        (RUNTIME_RAM_BYTES, f"runtime {RUNTIME_RAM_BYTES:,} B")], key=lambda p: -p[0])
        what = Choice(budget, s, {}, 0.0, c, "").summary()
        return (f"{Path(self.path).name}: --ram {budget:,} bytes does not fit even the smallest update ({what}): "
                f"it needs at least {c.ram:,} bytes ({-(-c.ram // 1024)}KB), mostly {parts[0][1]}, then "
                f"{' + '.join(p[1] for p in parts[1:])}; raise --ram to at least {c.ram:,} bytes")


def search_update(path, ram: int, loss: str = "xent", reorder: bool = True, stack: int | None = None,
                  target: str = "qemu-m4", calib=None, seed: int = 0, log=None, stream: str = "auto",
                  fusions: Fusions = Fusions()) -> Choice:
    """The sparse update with the most expected gain whose RAM fits ``ram`` (see the module docstring)."""
    return Searcher(path, loss=loss, reorder=reorder, stack=stack, target=target, calib=calib, seed=seed,
                    log=log, stream=stream, fusions=fusions).search(ram)


# -- pockmcu plan ---------------------------------------------------------------------------


def format_table(choices: list[Choice]) -> str:
    rows = [("budget", "RAM needed", "arena", "persistent", "expected gain", "scheme")]
    for c in choices:
        rows.append((f"{c.budget:,}", f"{c.cost.ram:,}", f"{c.cost.arena:,}", f"{c.cost.persistent:,}",
                     f"{c.gain:.3f}", c.summary()))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(v.rjust(widths[i]) for i, v in enumerate(r[:5])) + "  " + r[5])
        if j == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    return "\n".join(lines)


def plot_svg(choices: list[Choice], explored: list[tuple[float, int]], width: int = 720,
             height: int = 380) -> str:
    """RAM needed (x) against expected gain (y): one labelled point per budget, explored schemes in grey,
    budgets as dashed vertical lines."""

    left, top, w, h = 70, 15, width - 95, height - 60
    xs = [c.cost.ram for c in choices] + [c.budget for c in choices] + [r for _, r in explored]
    ys = [c.gain for c in choices] + [g for g, _ in explored]
    x0, x1 = 0, max(xs) * 1.05 or 1
    y1 = max(ys) * 1.1 or 1
    sx = lambda v: left + (v - x0) / (x1 - x0) * w  # noqa: E731
    sy = lambda v: top + h - v / y1 * h              # noqa: E731
    p = [f'<svg xmlns="http://www.w3.org/2000/svg" id="plan-plot" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
         f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" stroke="#999"/>']
    for k in range(5):
        v = x1 * k / 4
        p.append(f'<text x="{sx(v):.1f}" y="{top + h + 14}" text-anchor="middle">{v / 1024:.0f}K</text>')
        g = y1 * k / 4
        p.append(f'<text x="{left - 6}" y="{sy(g) + 4:.1f}" text-anchor="end">{g:.2f}</text>')
    for g, r in explored:
        p.append(f'<circle class="explored" cx="{sx(r):.1f}" cy="{sy(g):.1f}" r="2" fill="#bbb"/>')
    for c in choices:
        p.append(f'<line class="budget" x1="{sx(c.budget):.1f}" y1="{top}" x2="{sx(c.budget):.1f}" y2="{top + h}" '
                 f'stroke="#e15759" stroke-dasharray="4 3"/>')
    pts = sorted(choices, key=lambda c: c.cost.ram)
    p.append('<polyline fill="none" stroke="#4e79a7" stroke-width="1.5" points="'
             + " ".join(f"{sx(c.cost.ram):.1f},{sy(c.gain):.1f}" for c in pts) + '"/>')
    for c in choices:
        t = html.escape(f"budget {c.budget:,} B: RAM {c.cost.ram:,} B, gain {c.gain:.3f}: {c.summary()}")
        p.append(f'<circle class="point" cx="{sx(c.cost.ram):.1f}" cy="{sy(c.gain):.1f}" r="5" fill="#4e79a7" '
                 f'stroke="#222"><title>{t}</title></circle>')
        p.append(f'<text x="{sx(c.cost.ram) + 7:.1f}" y="{sy(c.gain) - 7:.1f}">{c.budget // 1024}KB</text>')
    p.append(f'<text x="{left + w / 2}" y="{height - 12}" text-anchor="middle">RAM needed (bytes; dashed: '
             f'budgets)</text>')
    p.append(f'<text x="14" y="{top + h / 2}" transform="rotate(-90 14 {top + h / 2})" '
             f'text-anchor="middle">expected gain</text>')
    p.append("</svg>")
    return "\n".join(p)


def render_plan_html(model: str, choices: list[Choice], searcher: Searcher) -> str:
    root = Path(__file__).resolve().parents[1] / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    explored = sorted({(round(g, 6), c.ram) for g, c in searcher.explored.values()})
    svg = plot_svg(choices, explored)
    return env.get_template("plan.html.j2").render(
        model=Path(model).name, version=__version__, choices=choices, svg=_markup(svg), source=searcher.source,
        layers=searcher.info,
        compiles=searcher.coster.compiles, inference_ram=searcher.inference_ram)


def _markup(text: str):
    return markupsafe.Markup(text)
