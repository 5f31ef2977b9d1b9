"""The flash cost rule of ``--kernels compact``: an optimized kernel is linked only when it pays for its flash.

A compile pass (pure: ``apply_cost_rule`` returns a new Graph). The rule, per model and core:

* Start from the portable build: every layer on its portable row. Its counted flash P = the weights plus
  the code of the portable kernels of the weighed layers (conv, depthwise, FC: the kinds with optimized
  rows). The allowance is 10% of P (``ALLOWANCE``). P leaves out the runtime and the other kernels, so
  the real portable firmware is larger and the real limit (+10% of it) looser than the one applied.
* An optimized kernel (a row needing a core feature) costs the flash its code adds to the build: its
  bytes (-O2), its ``*_get_buffer_size``, and any kernel it calls that is not linked yet (a fallback
  only linked, never called by a step, is compiled -Os by the Makefile and counted so), minus the
  portable code no layer calls any more. It saves sum over the layers that would run it of MACs x
  (instructions per MAC of the kernel they run now - its instructions per MAC). Sizes and instructions
  per MAC are measured per core (pockmcu/kernel_sizes.json, ``python -m pockmcu.kernel_sizes``).
* Greedy: repeatedly enable the kernel with the most instructions saved per byte added whose addition
  keeps the total added bytes within the allowance (a kernel that adds no bytes first); stop when none
  fits. Layers whose optimized kernel stayed out run the next row of the table (portable, or DSP
  instead of Helium). Once a kernel is linked, every layer of its shape class uses it (no more bytes).
* A kernel the table has no measurement for is left out (and says so): regenerate the table.

``--kernels auto`` skips the rule (every layer on its fastest row); ``portable`` has no optimized
rows; ``cmsis-nn`` is Arm's. The choice is in plan.json (``kernels.rule``) and gen's "kernels:" line.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from .ir import Graph
from .kernel_table import TABLE, choose
from .ops import opdef
from .targets import get_target

SIZES_FILE = Path(__file__).resolve().parent / "kernel_sizes.json"
#: optimized kernels may add at most this fraction of the portable build's counted flash
ALLOWANCE = 0.10


@lru_cache(maxsize=1)
def _read(path: str) -> str:
    return Path(path).read_text()


def load_table(path: Path = SIZES_FILE) -> dict:
    """pockmcu/kernel_sizes.json: {"sizes": {core: {function: {hot, cold, calls}}},
    "instructions_per_mac": {core: {function: float}}} (a fresh copy)."""
    return json.loads(_read(str(path)))


def weighed_kinds() -> list[str]:
    """The op kinds whose kernel the rule chooses: those with a row that needs a core feature."""
    return sorted(k for k, rows in TABLE.items() if any(r.features for r in rows))


class _Forward:
    """What an op's ``variant`` asks codegen about a forward graph: no weights are split-stored."""

    @staticmethod
    def head(_tensor: str) -> None:
        return None


def instructions_per_mac(speeds: dict, function: str) -> float | None:
    """Instructions per MAC of ``function`` (or of the kernel whose loops it runs, kernel_sizes.SAME_LOOPS)."""
    return speeds.get(function, speeds.get(SAME_LOOPS.get(function, ""), None))


#: kernels that run the same loops as a measured one (onnxruntime twins; per-channel FC = per-tensor FC's loop)
SAME_LOOPS = {
    "pockmcu_convolve_ort_s8": "arm_convolve_wrapper_s8",
    "pockmcu_depthwise_conv_ort_s8": "arm_depthwise_conv_wrapper_s8",
    "pockmcu_fully_connected_ort_s8": "arm_fully_connected_s8",
    "pockmcu_fully_connected_per_channel_ort_s8": "arm_fully_connected_s8",
    "arm_fully_connected_per_channel_s8": "arm_fully_connected_s8",
    "pockmcu_convolve_1x1_ort_s8_dsp": "pockmcu_convolve_1x1_s8_dsp",
    "pockmcu_convolve_ort_s8_dsp": "pockmcu_convolve_s8_dsp",
    "pockmcu_fully_connected_ort_s8_dsp": "pockmcu_fully_connected_s8_dsp",
    "pockmcu_fully_connected_per_channel_ort_s8_dsp": "pockmcu_fully_connected_s8_dsp",
    "pockmcu_fully_connected_per_channel_s8_dsp": "pockmcu_fully_connected_s8_dsp",
    "pockmcu_fully_connected_per_channel_mve_s8": "pockmcu_fully_connected_mve_s8",
}


def fallback_only(called: set[str]) -> list[str]:
    """The weighed kinds' table functions no step calls: linked at most as another kernel's fallback (a DSP
    kernel calls the portable row it stands in for when its fast path does not apply), which the generated
    Makefile compiles -Os. Every other kernel file (helpers a running kernel calls, *_get_buffer_size) stays
    -O2, so no kernel that runs changes."""
    return sorted({r.function for k in weighed_kinds() for r in TABLE[k]} - set(called))


def linked_bytes(called: set[str], sizes: dict) -> int | None:
    """Flash of the kernels ``called`` by steps and everything they link (their *_get_buffer_size and the
    kernels they call; -Os for fallback-only table rows, -O2 for the rest); None if one has no measured size."""
    seen, todo = set(), list(called)
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        if f not in sizes:
            return None
        seen.add(f)
        todo += sizes[f]["calls"] + ([f"{f}_get_buffer_size"] if f"{f}_get_buffer_size" in sizes else [])
    cold = set(fallback_only(called))
    return sum(sizes[f]["cold" if f in cold else "hot"] for f in seen)


def apply_cost_rule(g: Graph, target: str, table: dict | None = None) -> Graph:
    """``g`` with ``kernels_off`` (the optimized kernels the rule leaves out) and ``kernel_choice`` (why)."""
    if g.library != "pockmcu" or not g.features:
        return g
    table = load_table() if table is None else table
    core = get_target(target).core
    sizes = table["sizes"].get(core, {})
    speeds = table["instructions_per_mac"].get(core, {})
    kinds = set(weighed_kinds())
    layers = []
    for op in g.ops:
        if op.kind in kinds:
            d = opdef(op.kind)
            layers.append((op, d.kernel, d.variant(g, op, _Forward()), int(d.work(g, op))))

    def assign(off: frozenset) -> list[str]:
        return [choose(op.kind, default, g.numerics, g.features, variant, off=off).function
                for op, default, variant, _ in layers]

    off = frozenset(_all_optimized())
    base, fastest = assign(off), assign(frozenset())
    optimized = sorted(set(fastest) - set(base))      # what the fastest build would add
    # a layer whose portable and fastest rows are one kernel costs the same in every trial: left out of the sums
    varies = [i for i, (a, b) in enumerate(zip(base, fastest)) if a != b]

    def instructions(fns: list[str]) -> float | None:
        per = [instructions_per_mac(speeds, fns[i]) for i in varies]
        return None if None in per else sum(layers[i][3] * p for i, p in zip(varies, per))

    base_bytes = linked_bytes(set(base), sizes)
    weights = sum(t.nbytes for t in g.tensors.values() if t.is_const)
    if base_bytes is None or instructions(base) is None:
        missing = sorted({f for f in set(base) if f not in sizes}
                         | {base[i] for i in varies if instructions_per_mac(speeds, base[i]) is None})
        return _record(g, off, dict(allowance_bytes=0, counted_portable_bytes=weights, added_bytes=0, kept=[],
                                    left_out={f: f"the portable kernels {missing} have no size or speed measured for "
                                                 f"{core} (python -m pockmcu.kernel_sizes)" for f in optimized}),
                       layers)
    counted = weights + base_bytes
    allowance = int(ALLOWANCE * counted)
    added, kept, reasons = 0, [], {}
    while True:
        now = assign(off)
        now_bytes, now_instr = linked_bytes(set(now), sizes), instructions(now)
        best = None
        for f in sorted(off):
            trial = assign(off - {f})
            if f not in trial:                       # a Helium row may hide a DSP one: it never runs
                continue
            b, n = linked_bytes(set(trial), sizes), instructions(trial)
            if b is None:
                reasons[f] = f"no measured size on {core} (python -m pockmcu.kernel_sizes measures every table row)"
                continue
            if n is None:
                reasons[f] = f"no instructions-per-MAC measurement on {core} (python -m pockmcu.kernel_sizes)"
                continue
            cost, saving = b - now_bytes, now_instr - n
            if saving <= 0:
                reasons[f] = f"saves no instructions here (+{cost} B)"
                continue
            if added + cost > allowance:
                reasons[f] = (f"+{cost} B for {saving:,.0f} fewer instructions would pass the flash allowance "
                              f"({allowance} B = {ALLOWANCE:.0%} of {counted} B, {allowance - added} B left)")
                continue
            score = saving / max(cost, 1) if cost > 0 else float("inf")
            if best is None or score > best[0]:
                best = (score, f, cost, saving)
        if best is None:
            break
        _, f, cost, saving = best
        off, added = off - {f}, added + cost
        reasons.pop(f, None)
        kept.append(dict(function=f, bytes=cost, instructions_saved=round(saving),
                         saved_per_byte=round(saving / cost, 1) if cost > 0 else None))
    return _record(g, off, dict(allowance_bytes=allowance, counted_portable_bytes=counted, added_bytes=added,
                                kept=kept, left_out={f: reasons.get(f, "") for f in sorted(off)
                                                     if f in reasons or f in optimized}), layers)


def _all_optimized() -> set[str]:
    return {r.function for rows in TABLE.values() for r in rows if r.features}


def _record(g: Graph, off: frozenset, why: dict, layers: list) -> Graph:
    """The new graph: ``off`` and, per layer that does not run its fastest row, which kernel runs and why."""
    fallbacks = []
    for op, default, variant, _ in layers:
        fastest = choose(op.kind, default, g.numerics, g.features, variant).function
        runs = choose(op.kind, default, g.numerics, g.features, variant, off=off).function
        if runs != fastest:
            fallbacks.append(dict(layer=op.name, kernel=runs, instead_of=fastest, reason=why["left_out"][fastest]))
    rule = dict(rule=f"optimized kernels by instructions saved per flash byte within {ALLOWANCE:.0%} of the "
                     "portable build's counted flash (pockmcu/kernel_choice.py)", **why, fallbacks=fallbacks)
    return replace(g, kernels_off=off, kernel_choice=rule)


def summary(g: Graph) -> str:
    """One line for gen: what the rule kept and how many layers fell back."""
    r = g.kernel_choice
    if not r:
        return ""
    kept = ", ".join(k["function"] for k in r["kept"]) or "none"
    return (f"flash rule: +{r['added_bytes']} of {r['allowance_bytes']} B allowed; optimized kernels kept: {kept}; "
            f"{len(r['fallbacks'])} layer(s) on a slower row (plan.json kernels.rule says why)")
