"""Measure kiln.decompile over a corpus: every function code object in a set of source files.

    python tools/decompiler_corpus.py [--py312 ~/.pyenv/versions/3.12.1/bin/python] [--show N] [--json out]

For each function (a code object named like an identifier, found by compiling each module's
source file and walking co_consts: methods, nested functions and class bodies included; not
lambdas or comprehensions, which their parents contain) it records:
  decompiled  kiln.decompile returned source
  error       it raised kiln.DecompileError (a construct it does not rebuild; the reason is kept)
  crash       it raised anything else
  compiles    the source compiles (inside a function whose parameters are the original's free
              variables, so closures compile as closures)
  same        the recompiled function's bytecode equals the original's, instruction for
              instruction (names, constants, jump targets by position, nested code objects,
              exception table), so it behaves the same on every input
For 3.12 the code objects come from a 3.12 interpreter (--py312): it compiles the same files
(its own standard library), describes each function as tools/gen_decompiler_fixtures.py does,
this 3.11 process decompiles the descriptions, and the 3.12 interpreter compiles and compares.
This file runs under both interpreters and imports kiln only in the driver."""
import argparse
import collections
import dis
import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import types

STDLIB = ["textwrap", "json/encoder", "json/decoder", "string", "shlex", "heapq", "bisect", "fnmatch", "posixpath",
          "colorsys", "statistics", "difflib", "argparse", "ast", "inspect", "dataclasses", "functools",
          "collections/__init__", "enum", "contextlib", "tokenize", "pathlib", "configparser", "pprint", "csv",
          "calendar", "asyncio/tasks", "asyncio/locks", "asyncio/queues", "typing", "copy", "gettext", "ipaddress",
          "fractions", "random", "traceback", "shutil", "tempfile", "glob", "operator", "weakref", "abc"]
TORCH = ["nn/functional", "nn/modules/module", "nn/modules/linear", "nn/modules/conv", "nn/modules/activation",
         "nn/modules/normalization", "nn/modules/container", "nn/modules/pooling", "nn/modules/dropout",
         "nn/modules/loss", "nn/modules/rnn", "nn/modules/transformer", "nn/modules/batchnorm", "nn/init",
         "nn/utils/clip_grad", "optim/optimizer", "optim/adam", "optim/adamw", "optim/sgd", "optim/rmsprop",
         "optim/lr_scheduler", "optim/adagrad", "optim/swa_utils"]


def source_files(torch_dir):
    """(file, module import name) for each corpus module present."""
    lib = sysconfig.get_paths()["stdlib"]
    files = [(os.path.join(lib, m + ".py"), m.replace("/__init__", "").replace("/", ".")) for m in STDLIB]
    if torch_dir:
        files += [(os.path.join(torch_dir, m + ".py"), "torch." + m.replace("/", ".")) for m in TORCH]
    return [(f, name) for f, name in files if os.path.exists(f)]


def is_name(s):
    return s.isidentifier()


def walk(code, path, out):
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if is_name(c.co_name):
                out.append((path + ":" + c.co_qualname + ":" + str(c.co_firstlineno), c))
            walk(c, path, out)


# Per source file: the names its module scope binds by import. The compiler reads them: a method
# call on an imported module (`re.sub(...)`) compiles to LOAD_ATTR rather than LOAD_METHOD, so the
# recompiled source is compiled below such imports. MODULE: per source file, its import name and path.
IMPORTED = {}
MODULE = {}


def corpus(torch_dir):
    import symtable
    out = []
    for f, name in source_files(torch_dir):
        with open(f, encoding="utf-8") as fh:
            src = fh.read()
        top = compile(src, f, "exec", dont_inherit=True)
        rel = os.path.relpath(f, os.path.dirname(os.path.dirname(f)))
        MODULE[rel] = (name, f)
        IMPORTED[rel] = sorted(s.get_name() for s in symtable.symtable(src, f, "exec").get_symbols() if s.is_imported())
        walk(top, rel, out)
    return out


# ---- bytecode comparison ------------------------------------------------------------------------

SKIP = {"NOP", "RESUME", "CACHE", "EXTENDED_ARG"}


def normal(code):
    """Instructions as comparable tuples: jumps by target position, code constants recursively."""
    ins = [i for i in dis.get_instructions(code) if i.opname not in SKIP]
    pos = {}
    for k, i in enumerate(ins):
        pos[i.offset] = k
    allins = list(dis.get_instructions(code))

    def index_of(off):  # a target that is a skipped instruction: the next kept one
        for i in allins:
            if i.offset >= off and i.opname not in SKIP:
                return pos[i.offset]
        return len(ins)

    rows = []
    for i in ins:
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            rows.append((i.opname, "->", index_of(i.argval)))
        elif isinstance(i.argval, types.CodeType):
            rows.append((i.opname, normal(i.argval)))
        elif i.opname in ("LOAD_CONST", "RETURN_CONST", "KW_NAMES"):
            v = i.argval
            # (a frozenset's order follows string hashes, which differ between processes)
            text = repr(sorted(map(repr, v))) if isinstance(v, frozenset) else repr(v)
            rows.append((i.opname, type(v).__name__, text))
        else:
            rows.append((i.opname, i.argrepr))
    table = []
    for e in dis._parse_exception_table(code):
        row = (index_of(e.start), index_of(e.end), index_of(e.target), e.depth, e.lasti)
        if row[0] == row[1]:
            continue  # a range of skipped instructions only
        if table and table[-1][1] == row[0] and table[-1][2:] == row[2:]:
            table[-1] = (table[-1][0],) + row[1:]  # split only around skipped instructions
        else:
            table.append(row)
    flags = code.co_flags & (0x20 | 0x80 | 0x100 | 0x200 | 0x04 | 0x08)
    return (tuple(rows), tuple(table), flags, code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount,
            code.co_varnames[:code.co_argcount + code.co_kwonlyargcount], code.co_freevars)


def first_diff(a, b):
    ra, rb = a[0], b[0]
    for k in range(min(len(ra), len(rb))):
        if ra[k] != rb[k]:
            return f"instruction {k}: {ra[k]} vs {rb[k]}"
    if len(ra) != len(rb):
        return f"lengths {len(ra)} vs {len(rb)}"
    for k, name in enumerate(("table", "flags", "argcount", "kwonly", "posonly", "params", "freevars"), 1):
        if a[k] != b[k]:
            return f"{name}: {a[k]} vs {b[k]}"
    return "?"


def recompiled(code, src, imported=()):
    """The code object of the function (or class body) the source defines."""
    body = src
    if code.co_freevars:
        body = "def __kiln_make(" + ", ".join(code.co_freevars) + "):\n" + textwrap.indent(src, "    ")
    body = "".join(f"import {n}\n" for n in imported) + body
    top = compile(body, "<decompiled>", "exec", dont_inherit=True)
    found = []

    def find(c):
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                if k.co_name == code.co_name or (k.co_name == "_decompiled"):
                    found.append(k)
                find(k)
    find(top)
    if not found:
        raise LookupError("no function of that name in the source")
    return found[0]


def check(code, src, imported=()):
    """(compiles, same, why)."""
    try:
        new = recompiled(code, src, imported)
    except SyntaxError as e:
        return False, False, f"SyntaxError: {e}"
    except LookupError as e:
        return False, False, str(e)
    a, b = normal(code), normal(new)
    if a == b:
        return True, True, ""
    return True, False, first_diff(a, b)


# ---- 3.12 worker ------------------------------------------------------------------------------

def worker_describe(torch_dir, path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_decompiler_fixtures as g  # noqa: E402
    items = [(key, g.code_desc(c)) for key, c in corpus(torch_dir)]
    with open(path, "w") as f:
        json.dump(items, f)


def worker_check(torch_dir, sources_path, out_path, behave="0"):
    codes = dict(corpus(torch_dir))
    with open(sources_path) as f:
        sources = json.load(f)
    res = {}
    for key, src in sources.items():
        try:
            res[key] = list(check(codes[key], src, IMPORTED[key.split(':')[0]]))
        except Exception as e:  # noqa: BLE001 - reported
            res[key] = [False, False, f"{type(e).__name__}: {e}"]
    if behave == "1":
        compiled = {k: sources[k] for k, r in res.items() if r[0]}
        for k, b in behaviour(codes, compiled).items():
            res[k] += b
    with open(out_path, "w") as f:
        json.dump(res, f)


def behaviour(codes, sources):
    """Corpus key -> [state, why] from tools/decompiler_behaviour.py (the decompiled code run in
    place of the original under the modules' workloads)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import decompiler_behaviour
    module_of = {path: (name, f, IMPORTED[path]) for path, (name, f) in MODULE.items()}
    return decompiler_behaviour.check(codes, sources, module_of, recompiled)


# ---- driver ----------------------------------------------------------------------------------

def classify(err):
    msg = str(err)
    msg = msg.split(" (at offset")[0]
    if " in " in msg:
        msg = msg.rsplit(" in ", 1)[0]
    return msg


def report(label, results, show):
    n = len(results)
    dec = sum(1 for r in results.values() if r["status"] == "decompiled")
    err = sum(1 for r in results.values() if r["status"] == "error")
    crash = sum(1 for r in results.values() if r["status"] == "crash")
    comp = sum(1 for r in results.values() if r.get("compiles"))
    same = sum(1 for r in results.values() if r.get("same"))
    print(f"{label}: tried {n}, decompiled {dec}, DecompileError {err}, other errors {crash}, "
          f"compile {comp}, same bytecode {same}")
    if any("behaviour" in r for r in results.values()):
        ran = [r for r in results.values() if r.get("behaviour") in ("same", "differs")]
        diff_ran = [r for r in ran if not r.get("same")]
        bad = [k for k, r in results.items() if r.get("behaviour") == "differs"]
        ndiff = sum(1 for r in results.values() if r.get("compiles") and not r.get("same"))
        print(f"{label} behaviour: checked {len(ran)} of {comp} compiled "
              f"(of the {ndiff} with different bytecode: {len(diff_ran)}), behave the same {len(ran) - len(bad)}, differ {len(bad)}")
        for k in bad:
            print(f"  DIFFERS {k}: {results[k]['behaviour_why'][:300]}")
    reasons = collections.Counter()
    for r in results.values():
        if r["status"] != "decompiled":
            reasons["error: " + classify(r["why"])] += 1
        elif not r.get("compiles"):
            reasons["no compile: " + r["why"][:80]] += 1
        elif not r.get("same"):
            m = re.match(r"instruction \d+: \('(\w+)'.*? vs \('(\w+)'", r["why"])
            reasons["differs: " + (f"{m.group(1)} vs {m.group(2)}" if m else r["why"].split(":")[0])] += 1
    examples = {}
    for key, r in results.items():
        if r["status"] != "decompiled":
            examples.setdefault("error: " + classify(r["why"]), key)
    for why, k in reasons.most_common(show):
        print(f"  {k:4d}  {why}" + (f"   e.g. {examples[why]}" if why in examples else ""))


def decompile_all(items):
    import kiln
    out = {}
    for key, code in items:
        try:
            out[key] = {"status": "decompiled", "src": kiln._C.decompile(code, [], [])}
        except kiln.DecompileError as e:
            out[key] = {"status": "error", "why": str(e)}
        except Exception as e:  # noqa: BLE001 - counted
            out[key] = {"status": "crash", "why": f"{type(e).__name__}: {e}"}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--py312", default=None)
    ap.add_argument("--show", type=int, default=25)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", nargs="*")
    ap.add_argument("--behaviour", action="store_true", help="also run the decompiled code under the modules' workloads")
    args = ap.parse_args()
    if args.worker:
        what, torch_dir, *paths = args.worker
        (worker_describe if what == "describe" else worker_check)(torch_dir or None, *paths)
        return
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's kiln
    import torch
    torch_dir = os.path.dirname(torch.__file__)
    all_results = {}
    items = corpus(torch_dir)
    res = decompile_all(items)
    codes = dict(items)
    for key, r in res.items():
        if r["status"] == "decompiled":
            r["compiles"], r["same"], r["why"] = check(codes[key], r["src"], IMPORTED[key.split(":")[0]])
    if args.behaviour:
        compiled = {k: r["src"] for k, r in res.items() if r.get("compiles")}
        for k, (state, why) in behaviour(codes, compiled).items():
            res[k].update(behaviour=state, behaviour_why=why)
    report("3.11", res, args.show)
    all_results["3.11"] = res
    if args.py312:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            descs = os.path.join(tmp, "descs.json")
            subprocess.run([args.py312, __file__, "--worker", "describe", torch_dir, descs], check=True)
            with open(descs) as f:
                items = json.load(f)
            res = decompile_all(items)
            srcs = os.path.join(tmp, "srcs.json")
            outp = os.path.join(tmp, "out.json")
            with open(srcs, "w") as f:
                json.dump({k: r["src"] for k, r in res.items() if r["status"] == "decompiled"}, f)
            subprocess.run([args.py312, __file__, "--worker", "check", torch_dir, srcs, outp, "1" if args.behaviour else "0"],
                           check=True)
            with open(outp) as f:
                checked = json.load(f)
            for k, row in checked.items():
                res[k].update(compiles=row[0], same=row[1], why=row[2])
                if len(row) > 3:
                    res[k].update(behaviour=row[3], behaviour_why=row[4])
        report("3.12", res, args.show)
        all_results["3.12"] = res
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_results, f, indent=1)


if __name__ == "__main__":
    main()
