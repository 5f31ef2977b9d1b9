"""`pockmcu inspect`: what a model holds and what pockmcu can do with it."""

from __future__ import annotations

from pathlib import Path

from .compiler import unsupported
from .frontend import load_model
from .ops import REGISTRY
from .ops.base import op_problems


def _quant(t) -> str:
    if t.quant is None:
        return "-"
    if t.quant.per_channel:
        return f"per-channel x{t.quant.scale.size} (axis {t.quant.axis})"
    return f"scale {t.quant.s:.6g} zp {t.quant.zp}"


def inspect_model(path) -> str:
    g = load_model(path)
    problems = unsupported(g)
    lines = [f"{Path(path).name}: {g.format}, {len(g.ops)} ops, {len(g.tensors)} tensors"]
    for kind, names in (("input", g.inputs), ("output", g.outputs)):
        for n in names:
            t = g.t(n)
            lines.append(f"  {kind:6s} {n}: {t.dtype} {list(t.shape)} {_quant(t)}")
    lines.append("")
    lines.append(f"  {'#':>3} {'op':12s} {'kind':18s} {'MACs':>10}  {'output':28s} quantization")
    total = 0
    for i, op in enumerate(g.ops):
        d = REGISTRY.get(op.kind)
        macs = 0
        if d is not None and not op_problems(g, op):
            try:
                d.prepare(g, op)
                macs = d.macs(g, op)
            except Exception:  # a half-supported op still gets listed
                macs = 0
        total += macs
        out = g.t(op.outputs[0]) if op.outputs else None
        desc = f"{out.dtype} {list(out.shape)}" if out else ""
        weights = [g.t(x) for x in op.inputs[1:2] if x and g.t(x).is_const]
        q = _quant(weights[0]) if weights else (_quant(out) if out else "")
        mark = "" if d is not None and not op_problems(g, op) else "  <- unsupported"
        lines.append(f"  {i:3d} {op.name:12s} {op.kind:18s} {macs:10d}  {desc:28s} {q}{mark}")
    weights = sum(t.nbytes for t in g.tensors.values() if t.is_const)
    lines.append("")
    lines.append(f"  total {total} MACs, {weights} bytes of constants")
    if problems:
        lines.append(f"  NOT SUPPORTED ({len(problems)}):")
        lines += [f"    - {p}" for p in problems]
    else:
        lines.append("  supported: every op and dtype can be compiled")
    return "\n".join(lines)
