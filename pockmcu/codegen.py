"""Code generation: Jinja templates -> a self-contained C project in OUT.

OUT gets model.h / model.c (the schedule, one kernel call per op), weights.c /
weights.h (one const array per constant tensor), the kernels and firmware it
needs, a Makefile, plan.json and the human reports. Everything is rendered
into a temporary directory next to OUT and moved into place at the end, so a
failure never leaves a half-written OUT.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import jinja2
import numpy as np

from . import __version__
from .ccode import Emission, Names, check_lines, render_call, render_decl
from .ccode import float_lit as ccode_float_lit
from .compiler import RUNTIME_RAM_BYTES, Compiled
from .errors import PockError
from .ir import C_TYPES, DTYPE_BYTES, Graph, Tensor, c_ident
from .kernel_choice import fallback_only
from .kernel_table import Kernel, choose
from .ops import opdef
from .ops.base import option_items
from .ops.training_ops import nll_table
from .report import render_reports
from .resources import firmware_dir, kernels_dir, templates_dir
from .stream import macs as total_macs
from .training.params import entries

WEIGHT_ROLES = {1: "weights", 2: "bias"}
#: the scratch context of kernels that take one but need none
NO_SCRATCH = "pockmcu_no_scratch"
#: identifiers model.c uses itself: no tensor is named after them
RESERVED_NAMES = frozenset({"status", "train", "inputs", "outputs", "input_bytes", "output_bytes", "op_names",
                            "nll_table", "seed_stream", "label", "result", "out", "best", "rc", "k", "c", "p",
                            "dst", "src", "index", "bytes", "seed", "lr"})


def short_name(name: str, limit: int = 64) -> str:
    """A tensor name fit for a C comment: TFLite joins fused names with ';', keep the first."""
    first = name.split(";")[0].replace("*/", "* /")
    return first if len(first) <= limit else first[:limit - 3] + "..."


def float_lit(x: float) -> str:
    """A C float literal that reads back as exactly the same float32 (ccode.float_lit)."""
    return ccode_float_lit(x)


class CodeGen:
    """Names and helpers shared by the op snippets and the templates."""

    def __init__(self, c: Compiled):
        self.c = c
        self.g: Graph = c.graph
        self.plan = c.plan
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                                      undefined=jinja2.StrictUndefined, trim_blocks=True,
                                      lstrip_blocks=True, keep_trailing_newline=True)
        self.env.filters["short"] = short_name
        self.env.filters["sum_shape"] = lambda shape: int(np.prod(shape))
        self.train = c.train
        self.trainable = list(c.train.trainable_tensors) if c.train else []
        #: split-stored tensors (TrainGraph.head_channels): tensor -> trained input channels k
        self.heads = {t: k for t in self.trainable if (k := c.train.head_channels(t))}
        self.tensor_names = self._name_tensors()
        self.features = self.g.features
        self._rendered: dict[tuple, list[dict]] = {}

    # -- naming ---------------------------------------------------------------------------
    def _name_tensors(self) -> dict[str, str]:
        g, names, used = self.g, {}, set(RESERVED_NAMES)

        def claim(t: str, want: str) -> None:
            want = c_ident(want)
            name, k = want, 1
            while name in used:
                name, k = f"{want}_{k}", k + 1
            used.add(name)
            names[t] = name

        for i, t in enumerate(g.inputs):
            claim(t, f"input{i}" if len(g.inputs) > 1 else "input")
        for i, t in enumerate(g.outputs):
            if t not in names:
                claim(t, f"output{i}" if len(g.outputs) > 1 else "output")
        for op in g.ops:
            layer = op.layer      # the tiles of a streamed layer share its constants
            for k, t in enumerate(op.inputs):
                if t and t not in names and g.t(t).is_const:
                    claim(t, f"{layer}_{WEIGHT_ROLES.get(k, f'const{k}') if opdef(op.kind).kernel else f'const{k}'}")
            for k, t in enumerate(op.outputs):
                if t not in names:
                    claim(t, f"{op.name}_out" + (str(k) if k else ""))
        for op in (self.train.schedule if self.train else []):
            for t in op.inputs + op.outputs:
                if t and t not in names:
                    claim(t, t.split(";")[0].replace("/", "_")[-48:])
        return names

    def name(self, t: str) -> str:
        return self.tensor_names[t]

    # -- helpers visible to op snippets -----------------------------------------------------------
    def ptr(self, t: Tensor | str) -> str:
        return self.name(t if isinstance(t, str) else t.name)

    def const(self, t: str) -> str:
        """The C array of a constant tensor: its RAM copy when it trains whole, else the flash array
        (for a split-stored tensor the full original; its trained channels are in ``head(t)``)."""
        return self.param(t) if t in self.trainable and t not in self.heads else self.name(t)

    def param(self, t: str) -> str:
        """The RAM array of a trainable tensor (for a split-stored one only its trained channels)."""
        return f"{self.name(t)}_ram"

    def head(self, t: str) -> tuple[str, int] | None:
        """(RAM array, k) when ``t`` is split-stored: the first k input channels of every filter tap
        live in the RAM array (rows of k), the rest in ``const(t)``; None otherwise."""
        return (self.param(t), self.heads[t]) if t in self.heads else None

    def optimizer_args(self, t: str) -> dict:
        spec = self.train.spec
        k = self.trainable.index(t)
        return dict(accum=f"train.{self.name(t)}_accum" if spec.batch > 1 else "NULL",
                    velocity=f"train.{self.name(t)}_velocity" if spec.momentum > 0 else "NULL",
                    rng=f"&train.rng[{k}]")

    @staticmethod
    def float_list(values, per_line: int = 6) -> str:
        items = [float_lit(v) for v in np.asarray(values, np.float32).reshape(-1)]
        rows = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return rows[0] if len(rows) == 1 else "\n    " + ",\n    ".join(rows) + "\n"

    @staticmethod
    def int_list(values, per_line: int = 8) -> str:
        """Comma-separated integers, wrapped every ``per_line`` values for readable C."""
        items = [str(int(v)) for v in np.asarray(values).reshape(-1)]
        rows = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return rows[0] if len(rows) == 1 else "\n    " + ",\n    ".join(rows) + "\n"

    @staticmethod
    def float_lit(x: float) -> str:
        return float_lit(x)

    @staticmethod
    def dims(shape) -> str:
        s = [int(d) for d in shape]
        s = [1] * (4 - len(s)) + s if len(s) < 4 else s
        return "{" + ", ".join(str(d) for d in s) + "}"

    # -- rendering ----------------------------------------------------------------------------
    def layers(self, ops=None) -> list[dict]:
        """Each op rendered (declarations, call, kernel called), once per schedule: model.c and
        plan.json read the same rendering."""
        ops = self.g.ops if ops is None else ops
        key = tuple(id(op) for op in ops)
        if key not in self._rendered:
            self._rendered[key] = self._render(ops)
        return self._rendered[key]

    def _render(self, ops) -> list[dict]:
        out = []
        # declarations in schedule order, except that the tile copies of a streamed layer follow its
        # tile 0 (which declares the arrays they share), wherever the planner put them
        group: dict[str, int] = {}
        for step, op in enumerate(ops):
            group.setdefault(op.layer, step)
        for step, op in enumerate(ops):
            d = opdef(op.kind)
            rank = (group[op.layer], (op.tile.index if op.tile else 0), step)
            if d.alias:
                out.append(dict(step=step, op=op, describe=self.describe(op), decls="", call="", query="",
                                alias=True, kernel="", calls=[], decl_rank=rank))
                continue
            scratch = self.plan.scratch.get(op.name)
            kernel = self.kernel(op)
            n = c_ident(op.name)
            emission = d.emit(self.g, op, self)
            if emission is None:
                raise PockError(f"internal: {op.kind} has no C emission (OpDef.emit)")
            out.append(self._layer(step, op, n, rank, emission, scratch, kernel))
        return out

    def _layer(self, step: int, op, n: str, rank, emission: Emission, scratch: str | None, kernel: Kernel) -> dict:
        """One step's emission written as C (ccode renders; this resolves the names)."""
        names = Names(step=n, ptr=self._array, scratch=f"&{n}_ctx" if scratch else f"&{NO_SCRATCH}", ident=c_ident)
        decls = [render_decl(x, names) for x in emission.decls]
        if scratch and emission.uses_scratch():
            b = self.plan.buffer(scratch)
            decls.append(f"static const cmsis_nn_context {n}_ctx = {{.buf = pockmcu_arena + {b.offset}, "
                         f".size = {b.size}}}; /* scratch */")
        return dict(step=step, op=op, describe=self.describe(op), decls="\n".join(decls), alias=False,
                    call="\n".join(render_call(c, names, 4) for c in emission.calls),
                    call_in_block="\n".join(render_call(c, names, 8) for c in emission.calls),
                    kernel=kernel.function, decl_rank=rank, emission=emission,
                    calls=[c.function for c in emission.calls],
                    no_scratch=emission.uses_scratch() and not scratch,
                    query=render_call(emission.buffer_query, names, expression=True) if emission.buffer_query else "",
                    returns_status=any(c.status for c in emission.calls),
                    checks=check_lines(emission, names, lambda t: self.g.t(t).nbytes,
                                       lambda t: DTYPE_BYTES[self.g.t(t).dtype], self._region,
                                       f"{n}_ctx" if scratch else ""))

    def _region(self, t: str) -> tuple[str, str]:
        """The array a tensor's pointer must stay in (the checked build): the arena, or its own array."""
        if t in self.plan.tensor_buffer:
            return "pockmcu_arena", "POCKMCU_ARENA_BYTES"
        return self._array(t), f"sizeof {self._array(t)}"

    def _array(self, t: str) -> str:
        """The C array of a tensor as a call argument: a constant's as ``const`` gives it."""
        return self.const(t) if self.g.t(t).is_const else self.name(t)

    def uses_no_scratch(self) -> bool:
        """Whether any call passes the empty scratch context (model.c declares it then)."""
        schedules = [self.g.ops] + ([self.train.schedule] if self.train else [])
        return any(layer.get("no_scratch") for s in schedules for layer in self.layers(s))

    def kernel(self, op) -> Kernel:
        """The kernel-choice table's row for ``op`` on this target (kernel_table.py)."""
        d = opdef(op.kind)
        return choose(op.kind, d.kernel, self.g.numerics, self.features, d.variant(self.g, op, self), self.g.library,
                      off=self.g.kernels_off)

    def describe(self, op) -> str:
        if op.location == "training graph":
            layer = option_items(op).get("layer")
            what = op.kind.replace("_", " ").lower()
            return f"{what}" + (f" of {layer.name}" if layer is not None else "")
        return opdef(op.kind).describe(self.g, op)

    def training(self) -> dict | None:
        """Everything the training part of model.c needs."""
        if not self.train:
            return None
        tg, g = self.train, self.g
        owner = {}          # trainable tensor -> what it is, named after its layer as the C names it
        for u in tg.spec.layers:
            for role, k in (("weights", 1), ("bias", 2)):
                if len(u.op.inputs) > k and u.op.inputs[k]:
                    owner[u.op.inputs[k]] = f"the {role} of {u.op.name}"
        params = []
        for k, t in enumerate(self.trainable):
            tensor = g.t(t)
            head = self.heads.get(t, 0)
            params.append(dict(name=t, what=owner.get(t, f"'{short_name(t)}'"), c=self.name(t), ram=self.param(t),
                               ctype=C_TYPES[tensor.dtype],
                               count=int(np.prod(tg.stored_shape(t))), full=tensor.size, bytes=tg.stored_bytes(t),
                               state=tg.state_elements(t), index=k, head=head,
                               rows=tensor.size // tensor.shape[-1], row=tensor.shape[-1]))
        sched = self.layers(tg.schedule)
        out = g.t(g.outputs[0])
        # the forward phase: the inference schedule's ops (index in it) and the saves only training runs
        op_index = {id(op): k for k, op in enumerate(g.ops)}
        forward = [dict(layer=layer, op=op_index.get(id(layer["op"]))) for layer in sched[:tg.n_forward]]
        assert [f["layer"]["op"] for f in forward if f["op"] is not None] == list(g.ops), \
            "internal: the training step's forward phase is not the inference schedule"

        return dict(params=params, schedule=sched, forward=forward, spec=tg.spec, loss=tg.loss,
                    first_backward=tg.n_forward,
                    classes=out.shape[-1], out=out, out_ctype=C_TYPES[out.dtype],
                    label_count=int(np.prod(tg.label_shape)),
                    nll=self.float_list(nll_table()) if tg.loss == "xent" else "",
                    params_bytes=sum(p["bytes"] for p in params))

    def arena_map(self) -> list[dict]:
        """The arena tensors the generated C names (in a call, or as a model input or output)."""
        schedules = [self.g.ops] + ([self.train.schedule] if self.train else [])
        layers = [layer for s in schedules for layer in self.layers(s)]
        used = {t for layer in layers if "emission" in layer for t in layer["emission"].tensors()}
        used |= set(self.g.inputs + self.g.outputs)
        rows = []
        for t in sorted(self.plan.tensor_buffer, key=lambda t: self.plan.offset(t)):
            if t not in used:
                continue
            tensor = self.g.t(t)
            b = self.plan.buffer(self.plan.tensor_buffer[t])
            rows.append(dict(c=self.name(t), ctype=C_TYPES[tensor.dtype], offset=b.offset, tensor=tensor,
                             first=b.first, last=b.last))
        return rows

    def constants(self) -> list[dict]:
        rows = []
        for op in self.g.ops:
            if opdef(op.kind).alias:
                continue
            for k, t in enumerate(op.inputs):
                if not t or not self.g.t(t).is_const or any(r["name"] == t for r in rows):
                    continue
                tensor = self.g.t(t)
                data = np.asarray(tensor.data).reshape(-1)
                role = WEIGHT_ROLES.get(k, "constant") if opdef(op.kind).kernel else "constant"
                rows.append(dict(name=t, c=self.name(t), ctype=C_TYPES[tensor.dtype], tensor=tensor,
                                 count=data.size, lines=_value_lines(data, tensor.dtype),
                                 op=op.layer, role=role))
        return rows

    def io(self, names: list[str]) -> list[dict]:
        rows = []
        for t in names:
            tensor = self.g.t(t)
            rows.append(dict(name=t, c=self.name(t), ctype=C_TYPES[tensor.dtype], shape=list(tensor.shape),
                             dtype=tensor.dtype, bytes=tensor.nbytes, offset=self.plan.offset(t),
                             scale=float(tensor.quant.s) if tensor.quant else None,
                             zero_point=int(tensor.quant.zp) if tensor.quant else None))
        return rows

    def plan_json(self) -> dict:
        c, g, p = self.c, self.g, self.plan
        schedule = self.train.schedule if self.train else g.ops
        tensors = []
        for b in sorted(p.buffers, key=lambda b: (b.offset, b.first)):
            names = b.tensors or [b.name]
            c_names = [self.name(t) for t in names] if b.tensors else [c_ident(b.name)]
            tensors.append(dict(name=names[0], c=c_names[0], aliases=names[1:], c_aliases=c_names[1:], kind=b.kind,
                                offset=b.offset, size=b.size, first=b.first, last=b.last))
        return dict(
            generator=f"pockmcu {__version__}", model=Path(g.source).name, format=g.format, target=c.target,
            model_file="original" + Path(g.source).suffix.lower(),
            kernels=dict(library=g.library, features=sorted(g.features), **({"rule": g.kernel_choice}
                                                                             if g.kernel_choice else {})),
            arena_bytes=p.arena_bytes, lower_bound_bytes=p.lower_bound_bytes,
            greedy_by_size_bytes=p.greedy_bytes, planner=p.strategy,
            persistent_ram_bytes=c.persistent_ram_bytes, stack_bytes=c.stack_bytes,
            runtime_ram_bytes=RUNTIME_RAM_BYTES, ram_needed_bytes=c.ram_needed, ram_budget_bytes=c.ram_budget,
            flash_bytes=c.weights_bytes, flash_budget_bytes=c.flash_budget,
            macs=total_macs(g),
            inputs=self.io(g.inputs), outputs=self.io(g.outputs),
            steps=[dict(step=i, name=op.name, kind=op.kind, kernel=layer["kernel"], calls=layer["calls"],
                        macs=opdef(op.kind).macs(g, op), describe=self.describe(op),
                        phase="forward" if not self.train or i < self.train.n_forward else "backward")
                   for (i, op), layer in zip(enumerate(schedule), self.layers(schedule))],
            tensors=tensors,
            streamed=c.stream.summary() if c.stream else None,
            training=self.training_json())

    def training_json(self) -> dict | None:
        if not self.train:
            return None
        tg = self.train
        backward = tg.schedule[tg.n_forward:]
        return dict(loss=tg.loss, reorder=tg.reorder,
                    forward_macs=sum(opdef(op.kind).macs(self.g, op) for op in tg.schedule[:tg.n_forward]),
                    backward_macs=sum(opdef(op.kind).macs(self.g, op) for op in backward),
                    optimizer=dict(kind=tg.spec.kind, lr=tg.spec.lr, momentum=tg.spec.momentum),
                    batch=tg.spec.batch, qas=tg.spec.qas, rounding="stochastic (xorshift32 per tensor)",
                    spec=tg.spec.source, trainable=entries(tg, self.param),
                    layers=[dict(index=u.index, op=u.op.name, bias=u.bias, channels=u.channels,
                                 of_channels=u.total_channels) for u in tg.spec.layers],
                    label_shape=list(tg.label_shape))

    def render(self, template: str, **extra) -> str:
        ctx = dict(c=self.c, g=self.g, plan=self.plan, cg=self, version=__version__,
                   source=Path(self.g.source).name, **extra)
        return self.env.get_template(template).render(**ctx)


def _value_lines(data: np.ndarray, dtype: str, line_chars: int = 110) -> list[str]:
    if dtype == "float32":
        items = [float_lit(v) for v in data]
    else:
        items = [str(int(v)) for v in data]
    width = max((len(s) for s in items), default=1)
    per_line = max(1, min(16, line_chars // (width + 2)))
    return [", ".join(s.rjust(width) for s in items[i:i + per_line]) for i in range(0, len(items), per_line)]


def write_project(c: Compiled, out: str | Path) -> Path:
    """Render every file into a temporary sibling of OUT, then swap it into place."""
    out = Path(out).resolve()
    cg = CodeGen(c)
    plan = cg.plan_json()
    layers = cg.layers()
    files = {
        "model.h": cg.render("model.h.j2", plan_json=plan),
        "model.c": cg.render("model.c.j2", layers=layers, arena=cg.arena_map(), plan_json=plan,
                             training=cg.training()),
        "weights.h": cg.render("weights.h.j2", constants=cg.constants()),
        "weights.c": cg.render("weights.c.j2", constants=cg.constants()),
        "Makefile": cg.render("Makefile.j2", model_sources=["model.c", "weights.c"], ram_bytes=c.ram_budget,
                              flash_bytes=c.flash_budget, stack_bytes=c.stack_bytes,
                              default_target=c.target, model_name=c_ident(Path(c.graph.source).stem),
                              input_bytes=sum(t["bytes"] for t in plan["inputs"]),
                              float_inputs=any(t["dtype"] == "float32" for t in plan["inputs"]),
                              cold_kernels=fallback_only({f for s in plan["steps"] for f in s["calls"]})),
        "plan.json": json.dumps(plan, indent=1) + "\n",
    }

    files.update(render_reports(cg, plan))

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        shutil.copyfile(c.graph.source, tmp / plan["model_file"])  # export writes trained params into a copy
        shutil.copytree(kernels_dir(), tmp / "kernels", ignore=shutil.ignore_patterns("__pycache__", "*.o"))
        shutil.copytree(firmware_dir(), tmp / "firmware", ignore=shutil.ignore_patterns("__pycache__", "*.o"))
        if out.exists():
            old = out.with_name(f".{out.name}.old-{tmp.name[-8:]}")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
