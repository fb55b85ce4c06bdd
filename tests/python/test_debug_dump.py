"""The debug dump (KILN_DEBUG_DIR / options={"debug_dir": ...}): one folder per captured frame with
its code, captured graph, guards, reasons and what the code generator made of it, plus index.md
and manifest.json; results are the same with the dump on, and nothing is written when it is off."""
import ast
import json
import os
import re

import torch
import torch.nn as nn

import kiln

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


def test_training_graph_dump_has_forward_and_backward(tmp_path):
    d = str(tmp_path / "dump")
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    compiled = kiln.compile(m, options={"debug_dir": d})
    for _ in range(2):
        compiled(torch.randn(5, 8)).sum().backward()
    manifest = json.load(open(os.path.join(d, "manifest.json")))["entries"]
    loop_ir = open(os.path.join(d, manifest[0]["folder"], "loop_ir.txt")).read()
    assert "# forward" in loop_ir and "# backward" in loop_ir


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
