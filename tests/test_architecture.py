"""The compiler's structure: dependencies point one way, the code is ruff clean, and the kernel
every step runs is the kernel-choice table's (kernel_table.py), as the generated C calls it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT, SHARED

from pockmcu.compiler import TrainOptions, compile_model
from pockmcu.kernel_table import TABLE, Kernel, choose

PACKAGE = ROOT / "pockmcu"


def _module_imports() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> pockmcu modules it imports at module level; and every import of a pockmcu module
    made inside a function (file:line)."""
    mods = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    hidden = []
    for m, p in mods.items():
        base = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(p.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            pkg = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            targets = [f"{pkg}.{a.name}" for a in node.names if f"{pkg}.{a.name}" in mods] or [pkg]
            if node.col_offset:
                hidden.append(f"{p.relative_to(ROOT)}:{node.lineno}")
            graph[m] |= {t for t in targets if t in mods and t != m}
    return graph, hidden


def test_no_import_cycles():
    graph, _ = _module_imports()
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(d):] + [m, d]))
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_no_pockmcu_imports_hidden_in_functions():
    _, hidden = _module_imports()
    assert hidden == [], f"imports of pockmcu modules inside functions (to dodge a cycle?): {hidden}"


def test_ops_do_not_import_later_stages():
    """ir <- ops <- frontends / training / passes <- plan <- codegen <- cli."""
    graph, _ = _module_imports()
    later = ("pockmcu.codegen", "pockmcu.compiler", "pockmcu.plan", "pockmcu.frontend", "pockmcu.training",
             "pockmcu.cli", "pockmcu.search", "pockmcu.stream")
    for m, deps in graph.items():
        if m.startswith("pockmcu.ops") or m == "pockmcu.ir":
            bad = sorted(d for d in deps if d.startswith(later))
            assert not bad, f"{m} imports {bad}"


def test_ruff_clean():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "pockmcu", "tests"], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_choose_prefers_the_most_specific_row(monkeypatch):
    rows = (Kernel("portable"), Kernel("ort_only", "onnxruntime"), Kernel("dsp", features=frozenset({"dsp"})))
    monkeypatch.setitem(TABLE, "X_OP", rows)
    assert choose("X_OP", "", "tflm", frozenset()).function == "portable"
    assert choose("X_OP", "", "onnxruntime", frozenset()).function == "ort_only"
    assert choose("X_OP", "", "tflm", frozenset({"dsp", "fpu"})).function == "dsp"
    assert choose("NO_ROWS", "its_default", "tflm").function == "its_default"


CALLED = re.compile(r"\b((?:arm|pockmcu)_\w+|memcpy)\s*\(")
SPARSE = json.dumps({"bias": {"last": 4}, "weights": [{"layer": -1}, {"layer": -2, "ratio": 0.5}]})


@pytest.mark.parametrize("model, numerics, train", [
    (SHARED / "mlperf_kws_dscnn.tflite", None, "xent"),
    (SHARED / "mlperf_vww_mobilenetv1_96.tflite", None, "xent"),
    (SHARED / "mlperf_ad_autoencoder.tflite", None, "mse"),
    (SHARED / "mlperf_kws_dscnn_qdq.onnx", None, None),
    (SHARED / "mlperf_ic_resnet8_qdq.onnx", "tflm", None),
    (FIXTURES / "concat_channels.tflite", None, None),
    (FIXTURES / "train_mixed.tflite", None, "xent"),
    (ROOT / "tests" / "fixtures" / "onnx" / "softmax256_qdq_u8_pt.onnx", None, None),
    (ROOT / "tests" / "fixtures" / "onnx" / "pools_qop_s8_pt.onnx", None, None),
], ids=lambda v: getattr(v, "stem", str(v)))
def test_every_step_calls_the_kernel_the_table_chose(model, numerics, train):
    """plan.json and the reports name the table's kernel; the emitted call is that function, and
    plan.json's ``calls`` lists the functions the C calls."""
    from pockmcu.codegen import CodeGen

    opts = TrainOptions(spec=SPARSE, loss=train) if train else None
    c = compile_model(model, ram=1 << 30, numerics=numerics, train=opts)
    cg = CodeGen(c)
    schedule = c.train.schedule if c.train else c.graph.ops
    checked = 0
    for layer, step in zip(cg.layers(schedule), cg.plan_json()["steps"]):
        if layer["alias"]:
            continue
        assert step["kernel"] == layer["kernel"] == cg.kernel(layer["op"]).function
        called = CALLED.findall(layer["call"])
        assert called and set(called) == {layer["kernel"]}, (layer["op"].name, called, layer["kernel"])
        assert step["calls"] == called, (layer["op"].name, step["calls"], called)   # plan.json reads the data
        checked += 1
    assert checked >= 3


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
