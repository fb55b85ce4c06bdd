"""The debug dump (KILN_DEBUG_DIR / options={"debug_dir": ...}): one folder per captured frame with
its code, captured graph, guards, reasons and what the code generator made of it, plus index.md
and manifest.json; results are the same with the dump on, and nothing is written when it is off."""
import ast
import json
import os
import re

import pytest
import torch
import torch.nn as nn

import kiln
from conftest import assert_same

THIS = os.path.abspath(__file__)


def broken(x, w):
    a = torch.relu(x @ w) * 2
    print("a graph break")
    return a.softmax(-1) + 1


def test_dump_has_every_stage_and_an_index(tmp_path, capsys):
    d = str(tmp_path / "dump")
    compiled = kiln.compile(broken, options={"debug_dir": d})
    outs = []
    for n in (4, 4, 6):  # the third call recompiles
        x, w = torch.randn(n, 8), torch.randn(8, 8)
        outs.append((compiled(x, w), broken(x, w)))
    for got, want in outs:
        torch.testing.assert_close(got, want)

    manifest = json.load(open(os.path.join(d, "manifest.json")))["entries"]
    assert [e["resume_function"] for e in manifest] == [False, True, False, True]
    assert manifest[0]["graph_break"] and manifest[2]["recompile"]
    for e in manifest:
        stages = {f["stage"] for f in e["files"]}
        assert {"bytecode", "captured graph", "guards", "reasons", "aten graph", "loop ir", "kernels", "build"} <= stages, e
        for f in e["files"]:
            assert os.path.isfile(os.path.join(d, e["folder"], f["file"])), f
    index = open(os.path.join(d, "index.md")).read()
    for link in re.findall(r"\]\(([^)]+)\)", index):
        assert os.path.isfile(os.path.join(d, link)), link
    for e in manifest:  # every Python file of the dump parses
        for f in e["files"]:
            if f["file"].endswith(".py"):
                ast.parse(open(os.path.join(d, e["folder"], f["file"])).read())

    first = os.path.join(d, manifest[0]["folder"])
    reasons = open(os.path.join(first, "reasons.md")).read()
    assert "print()" in reasons and f"{THIS}:" in reasons
    recompiled = open(os.path.join(d, manifest[2]["folder"], "reasons.md")).read()
    assert "expected 4, actual 6" in recompiled
    assert "__resume_at_" in open(os.path.join(d, manifest[1]["folder"], "frame.txt")).read()

    # The captured graph is Python, and each op's file:line is the user's line that made it.
    src = open(os.path.join(first, "graph.py")).read()
    ast.parse(src)
    lines = open(THIS).read().splitlines()
    found = 0
    spelled = {"operator.matmul": "@", "operator.mul": "*"}
    for op, path, line in re.findall(r"= (\S+)\(.*#.* (\S+):(\d+)$", src, re.M):
        if path == THIS:
            assert spelled.get(op, op.split(".")[-1]) in lines[int(line) - 1], (op, lines[int(line) - 1])
            found += 1
    assert found >= 3
    assert "kernel" in open(os.path.join(first, "kernels.cpp")).read()
    # The loop IR before fusion has one kernel per pointwise op; after fusion relu*2 is one kernel.
    unfused = open(os.path.join(first, "loop_ir_unfused.txt")).read()
    fused = open(os.path.join(first, "loop_ir.txt")).read()
    assert unfused.count("kernel kernel") == 2 and fused.count("kernel kernel") == 1, (unfused, fused)
    assert "loop ir before fusion" in {f["stage"] for f in manifest[0]["files"]}

    # frame.py: the user's code decompiled, each statement ending with the user line it came from.
    here = {line.strip(): i + 1 for i, line in enumerate(lines)}
    for folder in (first, os.path.join(d, manifest[1]["folder"])):
        frame = open(os.path.join(folder, "frame.py")).read()
        ast.parse(frame)
        annotated = re.findall(r"^    (.*?)  # (\S+):(\d+)$", frame, re.M)
        assert len(annotated) >= 2, frame
        for stmt, path, line in annotated:
            if not stmt.startswith(("__kiln_stack", "del ")):
                assert path == os.path.basename(THIS) and lines[int(line) - 1].strip() == stmt.replace("'", '"'), (stmt, path, line, frame)
    print_line = here['print("a graph break")']
    assert f"print('a graph break')  # {os.path.basename(THIS)}:{print_line}" in open(os.path.join(first, "frame.py")).read()

    # transformed.py: what kiln runs instead of the frame, as Python: the graph, the break's call
    # run eagerly, the resume function it continues in.
    transformed = open(os.path.join(first, "transformed.py")).read()
    ast.parse(transformed)
    assert "__graph_out = __graph(x, w)" in transformed
    assert re.search(r"__result = print\('a graph break'\)  # .*test_debug_dump.py:\d+: the graph break", transformed), transformed
    resume = re.search(r"return (broken\.__resume_at_\d+)\(x, w, __graph_out\[0\], __result\)", transformed)
    assert resume, transformed
    assert manifest[1]["qualname"] == resume.group(1)
    assert "return __graph_out[0]" in open(os.path.join(d, manifest[1]["folder"], "transformed.py")).read()


def test_training_graph_dump_has_forward_and_backward(tmp_path):
    d = str(tmp_path / "dump")
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    compiled = kiln.compile(m, options={"debug_dir": d})
    for _ in range(2):
        compiled(torch.randn(5, 8)).sum().backward()
    manifest = json.load(open(os.path.join(d, "manifest.json")))["entries"]
    loop_ir = open(os.path.join(d, manifest[0]["folder"], "loop_ir.txt")).read()
    assert "# forward" in loop_ir and "# backward" in loop_ir
    unfused = open(os.path.join(d, manifest[0]["folder"], "loop_ir_unfused.txt")).read()
    assert "# forward" in unfused and "# backward" in unfused
    assert unfused.count("kernel kernel") > loop_ir.count("kernel kernel")
    # the ATen graphs and the generated kernels of both halves (they were missing for training)
    aten = open(os.path.join(d, manifest[0]["folder"], "aten_graph.txt")).read()
    assert "# forward" in aten and "# backward" in aten and "aten::gelu_backward" in aten, aten
    kernels = open(os.path.join(d, manifest[0]["folder"], "kernels.cpp")).read()
    assert "// ==== forward ====" in kernels and "// ==== backward ====" in kernels and "gelu_grad" in kernels


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x, d):
        self.calls = self.calls + 1
        y = self.fc(x)
        d["y"] = y.sum()
        if y.sum() > 0:  # a branch on a tensor: a graph break
            return y * 2
        return y - 1


def test_transformed_code_shows_side_effects_and_branch_breaks(tmp_path):
    m = _Counter()
    c = kiln.compile(m, options={"debug_dir": str(tmp_path)})
    x, d = torch.randn(2, 4), {}
    assert_same(c(x, d), _Counter.forward(m, x, {}))
    manifest = json.loads((tmp_path / "manifest.json").read_text())["entries"]
    text = (tmp_path / manifest[0]["folder"] / "transformed.py").read_text()
    ast.parse(text)
    assert "__graph(x, self.fc.weight, self.fc.bias)" in text, text
    assert "self.calls = 1" in text and "d.clear(); d.update({'y': __graph_out[" in text, text
    assert re.search(r"if (not )?__graph_out\[0\]:  # .*: the graph break, a branch", text), text
    assert text.count("_Counter.forward.__resume_at_") == 2, text


def test_no_dump_without_a_debug_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compiled = kiln.compile(broken)
    compiled(torch.randn(4, 8), torch.randn(8, 8))
    assert os.listdir(tmp_path) == []
    assert kiln._debug.current_entry() is None


def test_env_var_turns_the_dump_on(tmp_path):
    d = str(tmp_path / "env_dump")
    kiln._options.set("debug_dir", d)
    try:
        kiln.compile(lambda x: x.sin() + 1)(torch.randn(3))
    finally:
        kiln._options.set("debug_dir", "")
    assert json.load(open(os.path.join(d, "manifest.json")))["entries"]


def _stepped(x):
    y = torch.relu(x) * 2
    print("between graphs")  # a graph break: the rest runs in a resume function
    z = y.softmax(-1)
    return z + 1


def _first_op_line(path):
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.startswith("    ") and " = " in line:
                return i, line
    raise AssertionError(f"no op line in {path}")


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_breakpoints_in_dumped_graphs_are_hit_under_pdb(tmp_path, backend, capsys):
    import io
    import pdb

    c = kiln.compile(_stepped, backend=backend, options={"debug_dir": str(tmp_path)})
    x = torch.randn(3, 4)
    c(x)
    c(x)  # kiln: kernels are built and run from here on
    files = sorted(str(p) for p in tmp_path.glob("*/graph_module.py"))
    assert len(files) == 2 and "__resume_at_" in files[1], files
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert all(any(f["file"] == "graph_module.py" for f in e["files"]) for e in manifest["entries"])
    # Each op line carries the user's file:line, as graph.py does.
    line0, text0 = _first_op_line(files[0])
    assert text0.rstrip().endswith(f"{__file__}:{_stepped.__code__.co_firstlineno + 1}")
    line1, _ = _first_op_line(files[1])
    # The resume function's own code, decompiled: valid Python that continues after the print.
    resume_src = (tmp_path / os.path.basename(os.path.dirname(files[1])) / "frame.py").read_text()
    tree = ast.parse(resume_src)
    assert isinstance(tree.body[0], ast.FunctionDef) and "y.softmax(-1)" in resume_src and "print" not in resume_src

    def call():  # pdb's runcall stops at its first line; "c" goes on to the breakpoints
        return c(x)

    def session(commands, breakpoints):
        out = io.StringIO()
        debugger = pdb.Pdb(stdin=io.StringIO(commands), stdout=out, nosigint=True)
        for path, line in breakpoints:
            assert debugger.set_break(path, line) is None
        try:
            result = debugger.runcall(call)
        finally:
            debugger.clear_all_breaks()
        return result, out.getvalue()

    # Breakpoints in both graphs are hit, in order, with the graphs' values in scope.
    result, text = session("c\nn\np relu.shape\nc\nn\np softmax.shape\nc\n", [(files[0], line0), (files[1], line1)])
    assert f"{files[0]}({line0})forward()" in text and f"{files[1]}({line1})forward()" in text, text[-2000:]
    assert text.index(files[0]) < text.index(files[1])
    assert text.count("torch.Size([3, 4])") == 2, text[-2000:]
    assert_same(result, _stepped(x))
    # Stepping from the first graph goes on, past the break's print, into the resume function's graph.
    result, text = session("c\n" + "s\n" * 60 + "c\n", [(files[0], line0)])
    assert f"{files[1]}({line1})forward()" in text, text[-2000:]
    assert_same(result, _stepped(x))
    # Without a debugger the compiled code runs as before.
    assert_same(c(x), _stepped(x))
    if backend == "kiln":
        from kiln import _codegen
        assert all(g.compiled for g in _codegen.GRAPHS)


def test_dump_folder_shared_by_several_processes(tmp_path):
    """A second process (a benchmark's warm run, a rerun, a DDP rank) dumping into the same folder
    numbers its entries after the first's and both stay in the index and manifest."""
    import subprocess
    import sys
    d = str(tmp_path / "shared")
    prog = "import torch, kiln; kiln.compile(lambda x: x.sin() + 1)(torch.randn(3))"
    env = dict(os.environ, KILN_DEBUG_DIR=d, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(THIS))))
    for _ in range(2):
        subprocess.run([sys.executable, "-c", prog], env=env, check=True, timeout=300)
    entries = json.load(open(os.path.join(d, "manifest.json")))["entries"]
    assert [e["index"] for e in entries] == [0, 1] and entries[0]["pid"] != entries[1]["pid"]
    assert len({e["folder"] for e in entries}) == 2
    for e in entries:  # each folder holds its own process's files only, every one listed
        listed = {f["file"] for f in e["files"]}
        assert listed == set(os.listdir(os.path.join(d, e["folder"]))), (listed, e["folder"])
    index = open(os.path.join(d, "index.md")).read()
    for link in re.findall(r"\]\(([^)]+)\)", index):
        assert os.path.isfile(os.path.join(d, link)), link
    assert index.count("| first capture |") == 2


class _Holder:
    pass


_HELD = _Holder()


def _star_args(x, *rest, k=1, **kw):
    _HELD.v = 3
    y = x * k
    print("star args")
    return y + len(rest)


def test_transformed_code_is_python_for_any_signature_and_target(tmp_path):
    c = kiln.compile(_star_args, options={"debug_dir": str(tmp_path)})
    assert_same(c(torch.ones(2), 1, 2, k=2, z=1), _star_args(torch.ones(2), 1, 2, k=2, z=1))
    manifest = json.loads((tmp_path / "manifest.json").read_text())["entries"]
    text = (tmp_path / manifest[0]["folder"] / "transformed.py").read_text()
    tree = ast.parse(text)
    fn = tree.body[0]
    assert [a.arg for a in fn.args.args] == ["x"] and fn.args.vararg.arg == "rest" and fn.args.kwarg.arg == "kw"
    assert [a.arg for a in fn.args.kwonlyargs] == ["k"]
    assert "__object('<" in text and ".v = 3" in text, text


def _numpy_results(x):
    a = (x * 2).numpy()
    return a + 1, a.sum()


def test_transformed_code_spells_numpy_results(tmp_path):
    # Arrays and numpy scalars handed back from a graph (numpy interop) were printed as "?".
    c = kiln.compile(_numpy_results, options={"debug_dir": str(tmp_path)})
    x = torch.randn(3)
    got, want = c(x), _numpy_results(x)
    assert (got[0] == want[0]).all() and got[1] == want[1]
    manifest = json.loads((tmp_path / "manifest.json").read_text())["entries"]
    text = (tmp_path / manifest[0]["folder"] / "transformed.py").read_text()
    ast.parse(text)
    assert "__graph_out[0].numpy()" in text and "__graph_out[1].numpy()[()]" in text, text


def _dyn_slice(x, n):
    y = x.relu()
    return y[:n] * 2


def test_graph_with_operator_overloads_prints_as_python(tmp_path):
    """A slice by a symbolic size is recorded as an ATen overload: graph.py spells it as Python
    reaches it (torch.ops.aten.slice.Tensor), not as the overload's qualname (aten::slice.Tensor)."""
    c = kiln.compile(_dyn_slice, dynamic=True, options={"debug_dir": str(tmp_path)})
    x = torch.randn(6)
    assert_same(c(x, 3), _dyn_slice(x, 3))
    manifest = json.loads((tmp_path / "manifest.json").read_text())["entries"]
    graph = (tmp_path / manifest[0]["folder"] / "graph.py").read_text()
    ast.parse(graph)
    assert "slice_tensor = torch.ops.aten.slice.Tensor(" in graph, graph
    # graph_module.py carries the same user line for that op
    gm = (tmp_path / manifest[0]["folder"] / "graph_module.py").read_text()
    assert re.search(r"slice_tensor = .*# \S+test_debug_dump.py:\d+$", gm, re.M), gm


@pytest.mark.skipif(not hasattr(__import__("sys"), "monitoring"), reason="sys.monitoring is new in 3.12")
@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_sys_monitoring_debugger_steps_through_the_dumped_graphs(tmp_path, backend):
    """A debugger registered with sys.monitoring (3.12: IDEs such as VS Code's) sees the graphs'
    Python form run from the dumped graph_module.py files, both graphs of the broken frame."""
    import sys
    mon = sys.monitoring
    c = kiln.compile(_stepped, backend=backend, options={"debug_dir": str(tmp_path)})
    x = torch.randn(3, 4)
    c(x)
    c(x)  # kiln: kernels are built and run from here on
    started = []
    mon.use_tool_id(mon.DEBUGGER_ID, "kiln-test")
    try:
        mon.register_callback(mon.DEBUGGER_ID, mon.events.PY_START, lambda code, offset: started.append(code.co_filename))
        mon.set_events(mon.DEBUGGER_ID, mon.events.PY_START)
        result = c(x)
    finally:
        mon.set_events(mon.DEBUGGER_ID, 0)
        mon.register_callback(mon.DEBUGGER_ID, mon.events.PY_START, None)
        mon.free_tool_id(mon.DEBUGGER_ID)
    assert_same(result, _stepped(x))
    dumped = sorted(str(p) for p in tmp_path.glob("*/graph_module.py"))
    assert len(dumped) == 2
    assert [f for f in started if f.endswith("graph_module.py")] == dumped, started
    # With no debugger the compiled code runs as before.
    assert_same(c(x), _stepped(x))


def test_a_break_at_an_attribute_store_reads_as_the_store(tmp_path):
    def fn(x):
        h = x[:, None] * 2
        h.requires_grad = True
        return (h * 3).sum()

    kiln.compile(fn, options={"debug_dir": str(tmp_path)})(torch.randn(3))
    manifest = json.load(open(os.path.join(tmp_path, "manifest.json")))["entries"]
    transformed = open(os.path.join(tmp_path, manifest[0]["folder"], "transformed.py")).read()
    ast.parse(transformed)
    assert re.search(r"__graph_out\[0\]\.requires_grad = True  # .*test_debug_dump.py:\d+: the graph break, run eagerly", transformed), transformed
    # a nested function's "<locals>" is spelled so that the file parses
    assert re.search(r"return test_a_break_at_an_attribute_store_reads_as_the_store\.locals\.fn\.__resume_at_\d+\(x, __graph_out\[0\]\)",
                     transformed), transformed
