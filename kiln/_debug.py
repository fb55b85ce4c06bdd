"""Glue writing the debug dump (KILN_DEBUG_DIR, or kiln.compile(options={"debug_dir": ...})).

The C++ core hands over what each capture produced (csrc/frontend/hook/frame_dispatch.cpp,
dump_capture) and the code generator what each graph became (kiln/_codegen.py); this file only
writes them. Layout, one folder per captured frame (resume functions are frames of their own):

    <dir>/index.md                     every entry, with links
    <dir>/manifest.json                the same, machine-readable: function, entry, files, stages
    <dir>/<NNN>_<function>/
        frame.txt                      the frame's code: kiln's own (a resume function) or the user's, disassembled
        frame.py                       the same code decompiled to Python (kiln.decompile), each line ending with
                                       the user's file:line its bytecode came from; or why it could not be decompiled
        transformed.py                 what kiln runs in place of that code when the entry's guards pass, as Python:
                                       the graph's inputs fetched, the graph called, the result and side effects
                                       built; at a graph break the instruction run eagerly and the resume function called
        graph.py                       the captured graph (torch.fx-style Python, user file:line per op)
        graph_module.py                the same graph as the code torch.fx runs: with a dump on, the graph's
                                       frames point at this file, so a debugger's breakpoints there are hit
                                       (see steppable() below)
        guards.txt                     the guards, as readable code
        reasons.md                     why this entry exists: recompile reason, graph break and its stack
        aten_graph[_k].txt             the ATen graph the code generator traced (per size specialisation k)
        loop_ir_unfused[_k].txt        the loop IR before fusion: every ATen op's value its own kernel
        loop_ir[_k].txt                the loop IR after fusion, scheduling and memory planning: kernels,
                                       extern ATen calls and the order the wrapper (CompiledGraph) runs them in
                                       (forward and backward for training graphs)
        kernels[_k].cpp                the generated C++ kernels
        codegen[_k].json               build status and time per stage

Step-through debugging: with a dump on, each graph a backend receives runs its forward from the
code in graph_module.py (compiled with that file name), and whenever a debugger is tracing (pdb,
sys.settrace, or a sys.monitoring debugger on 3.12) kiln runs that Python form instead of generated
kernels, so a breakpoint set in graph_module.py is hit on every call and `step` walks the graph's
ops with their values; a graph break's resume function has its own folder and graph_module.py.
backend="eager" runs the Python form with a dump on.

Nothing is written, and nothing on the per-call path runs, unless a debug directory is set."""
from __future__ import annotations

import dis
import io
import json
import os
import re
import threading
import warnings

_lock = threading.Lock()
_entries: dict[str, list] = {}   # debug dir -> manifest entries
_counts: dict[str, int] = {}     # debug dir -> entries written
_current = threading.local()     # .path: the folder of the capture a backend is compiling on this thread


def current_entry() -> str | None:
    """The folder of the capture whose graph the backend is compiling now (None when not dumping)."""
    return getattr(_current, "path", None)


class compiling_for:
    """While a backend compiles a capture's graph: current_entry() is that capture's folder."""

    def __init__(self, folder):
        self.folder = folder

    def __enter__(self):
        self.prev = current_entry()
        _current.path = self.folder

    def __exit__(self, *exc):
        _current.path = self.prev


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80].strip("_") or "frame"


def _write(path: str, name: str, text: str) -> str:
    with open(os.path.join(path, name), "w") as f:
        f.write(text)
    return name


_USER_LOC = re.compile(r"^    (\w+) = .*#.*?\s(\S+:\d+)$")


def steppable(gm, folder: str):
    """Rebinds the fx GraphModule `gm`'s forward to its own code written as `folder`/graph_module.py
    (each op's line annotated with the user's file:line from graph.py), so the graph's frames point
    at that file. Returns gm; on any failure gm is left as it was (the dump never changes results)."""
    try:
        user_loc = {}
        graph_py = os.path.join(folder, "graph.py")
        if os.path.exists(graph_py):
            with open(graph_py) as f:
                for line in f:
                    m = _USER_LOC.match(line.rstrip("\n"))
                    if m:
                        user_loc[m.group(1)] = m.group(2)
        lines = ["# The captured graph as torch.fx runs it. kiln runs this code (not generated kernels) while a",
                 "# debugger is tracing, so breakpoints set here are hit; see graph.py for shapes and dtypes.", ""]
        for line in gm.code.strip("\n").splitlines():
            m = re.match(r"^    (\w+) = ", line)
            if m and m.group(1) in user_loc and "#" not in line:
                line += f"  # {user_loc[m.group(1)]}"
            lines.append(line)
        source = "\n".join(lines) + "\n"
        path = os.path.join(folder, "graph_module.py")
        with open(path, "w") as f:
            f.write(source)
        cls = type(gm)
        namespace = dict(cls.forward.__globals__)
        exec(compile(source, path, "exec"), namespace)  # noqa: S102 - kiln's own generated graph code
        cls.forward = namespace["forward"]
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"kiln: making the graph in {folder!r} steppable failed: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)
    return gm


def _decompiled(code) -> str:
    """The frame's code as Python source (kiln.decompile), or why it could not be decompiled; each
    line that runs code ends with the user's file:line it came from (see annotate_lines)."""
    from ._decompile import decompile
    head = (f"# {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}), decompiled from its bytecode by kiln.decompile;\n"
            f"# each line ends with the line of {os.path.basename(code.co_filename)} (file:line) its bytecode came from\n")
    try:
        src = decompile(code)
    except Exception as e:  # noqa: BLE001 - a construct the decompiler does not rebuild: say so, never guess
        return head + f"# not decompiled: {type(e).__name__}: {e}\n# (frame.txt has the bytecode)\n"
    return head + annotate_lines(code, src)


def _instructions(code):
    """(key, line) per instruction of `code`; the key ignores what compiling the same source at other
    line numbers changes (caches, jump offsets), so two compilations of one function line up."""
    out = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("CACHE", "EXTENDED_ARG", "NOP", "RESUME"):
            continue
        arg = ins.argval if ins.opcode not in dis.hasjrel and ins.opcode not in dis.hasjabs else None
        if hasattr(arg, "co_name"):
            arg = ("code", arg.co_name)
        try:
            hash(arg)
        except TypeError:
            arg = repr(arg)
        out.append(((ins.opname, arg), ins.positions.lineno if ins.positions else None))
    return out


def _line_map(original, recompiled, found: dict) -> None:
    """Adds recompiled line -> original line for the instructions the two codes share (nested code
    objects paired by name, in order)."""
    import difflib
    a, b = _instructions(recompiled), _instructions(original)
    matcher = difflib.SequenceMatcher(None, [k for k, _ in a], [k for k, _ in b], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            ra, ob = a[block.a + k][1], b[block.b + k][1]
            if ra is not None and (not found.get(ra)):  # 0: only code of kiln's own (no user line)
                found[ra] = ob or 0
    nested = {}
    for c in original.co_consts:
        if hasattr(c, "co_code"):
            nested.setdefault(c.co_name, []).append(c)
    for c in recompiled.co_consts:
        if hasattr(c, "co_code") and nested.get(c.co_name):
            _line_map(nested[c.co_name].pop(0), c, found)


def annotate_lines(code, src: str) -> str:
    """`src` (kiln.decompile(code)) with `  # file:line` after each line whose bytecode lines up with
    an instruction of `code`: the decompiled source is compiled again and its instructions matched
    with the original's. Lines that line up with nothing (else:, try:) stay as they are; on any
    failure the source is returned unannotated."""
    try:
        import textwrap
        lines = src.splitlines()
        body, shift = src, 0
        if code.co_freevars:  # a closure compiles inside a function that binds its free variables
            body = "def __kiln_make(" + ", ".join(code.co_freevars) + "):\n" + textwrap.indent(src, "    ")
            shift = 1
        top = compile(body, "<decompiled>", "exec", dont_inherit=True)
        if shift:
            top = next(c for c in top.co_consts if hasattr(c, "co_code"))
        recompiled = next(c for c in top.co_consts if hasattr(c, "co_code"))
        found: dict[int, int] = {}
        _line_map(code, recompiled, found)
        if code.co_firstlineno:
            found.setdefault(1 + shift, code.co_firstlineno)
        name = os.path.basename(code.co_filename)  # the header names the whole path
        for i in range(len(lines)):
            user = found.get(i + 1 + shift)
            if user is not None and lines[i].strip() and not lines[i].lstrip().startswith(("#", "@")):
                lines[i] += f"  # {name}:{user}" if user else "  # kiln's own code (no user line)"
        return "\n".join(lines) + "\n"
    except Exception:  # noqa: BLE001 - annotations are a help; the source is right without them
        return src


def _disassemble(code) -> str:
    out = io.StringIO()
    out.write(f"# {code.co_qualname} ({code.co_filename}:{code.co_firstlineno})\n")
    dis.dis(code, file=out, depth=0)
    return out.getvalue()


def record_capture(debug_dir: str, facts: dict) -> str | None:
    """Called by the C++ core for every capture of a function compiled with a debug directory;
    returns the capture's folder (the backend's artifacts go there too)."""
    try:
        return _record(debug_dir, facts)
    except Exception as e:  # noqa: BLE001 - the dump must never change what the program does
        warnings.warn(f"kiln: writing the debug dump to {debug_dir!r} failed: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)
        return None


def _claim_folder(debug_dir: str, slug: str):
    """The next free entry number in `debug_dir` and its new folder. A folder used before (an earlier
    run, another process such as a benchmark's warm run or a DDP rank) is never reused: numbering
    goes on after the highest number there, and a folder another process made first is skipped."""
    os.makedirs(debug_dir, exist_ok=True)
    n = _counts.get(debug_dir)
    if n is None:
        n = 1 + max((int(f[:3]) for f in os.listdir(debug_dir) if f[:3].isdigit() and f[3:4] == "_"), default=-1)
    while True:
        taken = any(f.startswith(f"{n:03d}_") for f in os.listdir(debug_dir))
        path = os.path.join(debug_dir, f"{n:03d}_{slug}")
        if not taken:
            try:
                os.makedirs(path)
                _counts[debug_dir] = n + 1
                return n, path
            except FileExistsError:
                pass
        n += 1


def _record(debug_dir: str, facts: dict) -> str:
    code = facts["code"]
    function = facts["function"]
    with _lock:
        n, path = _claim_folder(debug_dir, _slug(code.co_qualname))
    files = {}
    files["frame.txt"] = _write(path, "frame.txt", _disassemble(code))
    files["frame.py"] = _write(path, "frame.py", _decompiled(code))
    if facts.get("graph"):
        files["graph.py"] = _write(path, "graph.py", facts["graph"])
    if facts.get("transformed"):
        files["transformed.py"] = _write(path, "transformed.py", facts["transformed"])
    if facts.get("guards"):
        files["guards.txt"] = _write(path, "guards.txt", facts["guards"])
    reasons = [f"# {function}\n"]
    if facts.get("where"):
        reasons.append(f"captured from {facts['where']}\n")
    if facts.get("recompile_reason"):
        reasons.append(f"\n## recompiled because a guard failed\n\n    {facts['recompile_reason']}\n")
    for change in facts.get("dynamic_changes") or []:
        reasons.append(f"\n## dynamic shapes\n\n    {change}\n")
    if facts.get("break_reason"):
        reasons.append(f"\n## graph break\n\n{facts['break_reason']}\n\nat {facts.get('break_where') or '?'}\n")
        if facts.get("break_stack"):
            reasons.append("\n```\n" + facts["break_stack"].rstrip() + "\n```\n")
    if facts.get("runs_eagerly"):
        reasons.append("\nThis frame runs eagerly: nothing was compiled for it.\n")
    files["reasons.md"] = _write(path, "reasons.md", "".join(reasons))
    entry = {"index": n, "pid": os.getpid(), "function": function, "qualname": code.co_qualname, "file": code.co_filename,
             "line": code.co_firstlineno, "folder": os.path.basename(path),
             "resume_function": "__resume_at_" in code.co_qualname,
             "graph_break": bool(facts.get("break_reason")), "recompile": bool(facts.get("recompile_reason")),
             "files": [{"file": f, "stage": _STAGES[k]} for k, f in files.items()]}
    with _lock:
        _entries.setdefault(debug_dir, []).append(entry)
        _write_index(debug_dir)
    return path


_STAGES = {"frame.txt": "bytecode", "frame.py": "decompiled source", "transformed.py": "transformed code", "graph.py": "captured graph", "graph_module.py": "graph as torch.fx runs it", "guards.txt": "guards",
           "reasons.md": "reasons", "aten_graph": "aten graph", "loop_ir_unfused": "loop ir before fusion", "loop_ir": "loop ir", "kernels": "kernels", "codegen": "build"}


def record_codegen(path: str, g) -> None:
    """Called when a graph compiled from the capture dumped in `path` was traced and built."""
    try:
        with _lock:
            k = sum(1 for f in os.listdir(path) if f.startswith("codegen"))
            suffix = "" if k == 0 else f"_{k}"
            written = []
            if g.graph_text:
                written.append((_write(path, f"aten_graph{suffix}.txt", g.graph_text), "aten graph"))
            if g.program_text:
                unfused = g.unfused_program_text
                if unfused:
                    written.append((_write(path, f"loop_ir_unfused{suffix}.txt", unfused), "loop ir before fusion"))
                written.append((_write(path, f"loop_ir{suffix}.txt", g.program_text), "loop ir"))
            if g.source:
                written.append((_write(path, f"kernels{suffix}.cpp", g.source), "kernels"))
            info = {"status": g.status, "training": g.training_status, "timings": dict(g.timings),
                    "kernels": g.num_kernels, "extern_calls": g.num_externs}
            written.append((_write(path, f"codegen{suffix}.json", json.dumps(info, indent=2, default=str)), "build"))
            debug_dir = os.path.dirname(path)
            for entry in _entries.get(debug_dir, []):
                if entry["folder"] == os.path.basename(path):
                    entry["files"].extend({"file": f, "stage": s} for f, s in written)
            _write_index(debug_dir)
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"kiln: writing the debug dump to {path!r} failed: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


def note_file(path: str, name: str) -> None:
    """Lists a file written into the capture folder `path` in the manifest and index."""
    try:
        with _lock:
            debug_dir = os.path.dirname(path)
            for entry in _entries.get(debug_dir, []):
                if entry["folder"] == os.path.basename(path) and os.path.exists(os.path.join(path, name)):
                    entry["files"].append({"file": name, "stage": _STAGES[name]})
            _write_index(debug_dir)
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"kiln: writing the debug dump to {path!r} failed: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


def _write_index(debug_dir: str) -> None:
    # Entries other processes wrote into the same folder (read back from the manifest there) stay
    # listed beside this process's.
    mine = _entries.get(debug_dir, [])
    ours = {e["folder"] for e in mine}
    try:
        with open(os.path.join(debug_dir, "manifest.json")) as f:
            theirs = [e for e in json.load(f).get("entries", []) if e.get("folder") not in ours]
    except (OSError, ValueError):
        theirs = []
    entries = sorted(theirs + mine, key=lambda e: e.get("index", 0))
    _replace(os.path.join(debug_dir, "manifest.json"), json.dumps({"entries": entries}, indent=2))
    lines = ["# kiln debug dump\n", "\nOne folder per captured frame, in capture order (`process`: the process that "
             "wrote it, when several wrote here). `manifest.json` lists the same files with their stages.\n\n",
             "| # | function | process | kind | files |\n|---|---|---|---|---|\n"]
    for e in entries:
        kind = ", ".join(k for k, on in (("resume function", e["resume_function"]), ("graph break", e["graph_break"]),
                                         ("recompile", e["recompile"])) if on) or "first capture"
        links = " ".join(f"[{x['file']}]({e['folder']}/{x['file']})" for x in e["files"])
        lines.append(f"| {e['index']} | `{e['function']}` | {e.get('pid', '')} | {kind} | {links} |\n")
    _replace(os.path.join(debug_dir, "index.md"), "".join(lines))


def _replace(path: str, text: str) -> None:
    """Writes `path` whole (a temporary file renamed over it): a process reading it while another
    writes never sees half a file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
