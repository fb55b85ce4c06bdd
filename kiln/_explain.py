"""kiln.explain(fn)(*args): compile and run once, then report graphs, graph breaks (reason, user
file:line and the chain of inlined calls that led there), recompiles within the call (the guard
that failed, with the value it expected and the one it found, and the user's stack at the call) and guards of what it captured."""
from __future__ import annotations

import dataclasses
import os

from . import _C


@dataclasses.dataclass
class ExplainOutput:
    graphs: list
    breaks: list
    result: object = None
    recompiles: list = dataclasses.field(default_factory=list)
    recompile_stacks: list = dataclasses.field(default_factory=list)  # per recompile: the user's stack at the call

    @property
    def graph_count(self):  # captures with no operator run as the frame would: not graphs (as Dynamo counts)
        return sum(1 for g in self.graphs if g["ops"] > 0)

    @property
    def graph_break_count(self):
        return len(self.breaks)

    def __str__(self):
        out = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        for i, b in enumerate(self.breaks):
            out.append(f"Break {i}: {b['function']} at {b['where']}: {b['reason']}")
            if b.get("stack", "").strip():
                out.append("  user stack (outermost first):\n" + "\n".join("    " + ln for ln in b["stack"].rstrip().splitlines()))
        for i, r in enumerate(self.recompiles):
            out.append(f"Recompile {i}: {r}")
            if i < len(self.recompile_stacks) and self.recompile_stacks[i].strip():
                out.append("  called from (outermost first):\n" + "\n".join("    " + ln for ln in self.recompile_stacks[i].rstrip().splitlines()))
        for i, g in enumerate(self.graphs):
            out.append(f"Graph {i}: {g['function']}, {g['ops']} ops, {g['inputs']} inputs, {g['guard_count']} guards")
            out.append(g["code"].rstrip())
            out.append("Guards:\n" + g["guards"].rstrip())
        return "\n".join(out)


_KILN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_frames(stack: str) -> str:
    """A break's or recompile's call stack without kiln's own frames (explain's runner)."""
    return "".join(ln for ln in stack.splitlines(keepends=True) if f" at {_KILN_DIR}" not in ln)


def explain(fn, **compile_kwargs):
    """As torch._dynamo.explain: every compiled entry is forgotten first (kiln.reset()), so a
    function compiled and called before is captured again and reported, not served from the cache."""
    from . import compile, reset

    def run(*args, **kwargs):
        reset()
        before = _C.stats()
        compiled = compile(fn, **compile_kwargs)
        result = compiled(*args, **kwargs)
        after = _C.stats()
        n = len(before["recompile_reasons"])
        breaks = [dict(b, stack=_user_frames(b.get("stack", ""))) for b in after["breaks"][len(before["breaks"]):]]
        return ExplainOutput(after["graph_records"][len(before["graph_records"]):], breaks, result,
                             after["recompile_reasons"][n:], [_user_frames(s) for s in after["recompile_stacks"][n:]])

    return run
