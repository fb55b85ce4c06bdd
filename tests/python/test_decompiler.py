"""kiln.decompile: decompiled source must compile and behave as the original.

Three sets: hand-written functions exercising each construct (tests/python/decompiler_cases.py,
run on their inputs: same results or same exception type); the 3.12 bytecode of the same
functions, recorded by tools/gen_decompiler_fixtures.py (decompiled from the recorded
descriptions, then compiled and run here); a corpus of real functions (standard library,
torch.nn.functional, torch.nn.modules, kiln's generated resume functions) that must compile,
with pure ones also run on inputs."""
import gc
import json
import math
import os
import sys
import textwrap
import types

import pytest
import torch

import kiln

sys.path.insert(0, os.path.dirname(__file__))
import decompiler_cases  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "decompiler_312.json")


def rebuild(fn, src, name=None):
    """The function the decompiled source defines, in a copy of the original's globals; closures
    get their cells' current values through an enclosing function."""
    code = fn.__code__
    name = name or code.co_name
    g = dict(fn.__globals__)
    if code.co_freevars:
        wrapper = "def __kiln_make(" + ", ".join(code.co_freevars) + "):\n" + textwrap.indent(src, "    ") + f"    return {name}\n"
        exec(compile(wrapper, "<decompiled>", "exec"), g)
        return g["__kiln_make"](*[c.cell_contents for c in fn.__closure__])
    exec(compile(src, "<decompiled>", "exec"), g)
    return g[name]


def compiles(code, src):
    body = src
    if code.co_freevars:
        body = "def __kiln_make(" + ", ".join(code.co_freevars) + "):\n" + textwrap.indent(src, "    ")
    compile(body, "<decompiled>", "exec")


def outcome(f, args):
    try:
        return ("ok", f(*args))
    except Exception as e:  # noqa: BLE001 - the exception type is the result
        return ("raise", type(e).__name__)


def same(a, b):
    if a == b:
        return True
    try:
        return repr(a) == repr(b)
    except Exception:
        return False


def check_behaviour(fn, src, inputs):
    new = rebuild(fn, src)
    for args in inputs:
        r1, r2 = outcome(fn, args), outcome(new, args)
        assert same(r1, r2), f"{fn.__name__}{args}: original {r1!r}, decompiled {r2!r}\n{src}"


# ---- hand-written constructs (3.11, this interpreter) ----------------------------------------

# Known gaps (clear DecompileErrors, never wrong source), to be closed: none at present.
KNOWN_311 = set()


@pytest.mark.parametrize("name", sorted(decompiler_cases.CASES))
def test_handwritten_case(name):
    fn, inputs = decompiler_cases.CASES[name]
    if name in KNOWN_311:  # a construct not rebuilt yet: a clear error, never wrong source
        with pytest.raises(kiln.DecompileError):
            kiln.decompile(fn)
        return
    src = kiln.decompile(fn)
    check_behaviour(fn, src, inputs)


def test_handwritten_counts():
    assert len(decompiler_cases.CASES) >= 80


# ---- the same functions' 3.12 bytecode (recorded) ---------------------------------------------

def _recorded():
    with open(DATA) as f:
        return json.load(f)


# 3.12 layouts not rebuilt yet (an async for nested in an inlined comprehension's loop): each must be
# a clear error. (with_stmt, a with block ending the function, and three_nested_tries are rebuilt now.)
KNOWN_312 = {"async_for_inside_comprehension"}


def test_312_fixtures_decompile_compile_and_behave():
    recorded = _recorded()
    assert recorded["python"].startswith("3.12")
    failures, passed = [], 0
    for name, desc in sorted(recorded["functions"].items()):
        fn, inputs = decompiler_cases.CASES[name]
        try:
            src = kiln._C.decompile(desc["code"], desc["defaults"], [tuple(p) for p in desc["kwdefaults"]])
        except kiln.DecompileError as e:
            if name not in KNOWN_312:
                failures.append(f"{name}: {e}")
            continue
        try:
            check_behaviour(fn, src, inputs)
            passed += 1
        except Exception as e:  # noqa: BLE001 - listed below
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    print(f"3.12 fixtures: tried {len(recorded['functions'])}, same behaviour {passed}")
    assert not failures, "\n".join(failures)
    assert passed == len(recorded["functions"]) - len(KNOWN_312)


# ---- corpus of real functions --------------------------------------------------------------

CORPUS_MODULES = ["textwrap", "json.encoder", "json.decoder", "string", "shlex", "heapq", "bisect", "fnmatch",
                  "posixpath", "colorsys", "statistics", "difflib", "torch.nn.functional", "torch.nn.modules.linear",
                  "torch.nn.modules.conv", "torch.nn.modules.activation", "torch.nn.modules.normalization",
                  "torch.nn.modules.container", "torch.nn.modules.pooling", "torch.nn.modules.dropout"]


def _functions_of(module):
    seen = set()
    for obj in vars(module).values():
        cands = [obj]
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            cands = list(vars(obj).values())
        for c in cands:
            if isinstance(c, (staticmethod, classmethod)):
                c = c.__func__
            if isinstance(c, property):
                c = c.fget
            if isinstance(c, types.FunctionType) and c.__module__ == module.__name__ and c.__code__ not in seen:
                seen.add(c.__code__)
                yield c


def _resume_functions():
    SINK = open(os.devnull, "w")

    def f1(x, n):
        y = x * 2
        print("break", file=SINK)
        return y + n

    def f2(x):
        a = x.sum()
        if a.item() > 0:
            return x + 1
        return x - 1

    def f3(x, ys):
        z = [x + 1, x]
        s = x.sum().item()
        total = z[0] * s
        for y in ys:
            total = total + y
        return total, {"k": s}

    def f4(x, k=2):
        print("one", file=SINK)
        y = x.relu()
        print("two", file=SINK)
        return y * k

    def f5(x, k):  # resumes inside an elif branch
        if k == 0:
            y = x + 1
        elif k == 1:
            print("b", file=SINK)
            y = x * 2
        else:
            y = x - 1
        return y

    def f6(x, n):  # resumes inside a nested if's branch
        if n > 2:
            y = x + n
            if n > 3:
                print("deep", file=SINK)
                y = y * 2
            else:
                y = y - 1
            z = y + 1
        else:
            z = x
        return z

    for f, args in ((f1, (torch.ones(3), 2)), (f2, (torch.ones(3),)), (f2, (-torch.ones(3),)),
                    (f3, (torch.ones(2), [1, 2])), (f4, (torch.ones(2),)), (f5, (torch.ones(2), 1)),
                    (f6, (torch.ones(2), 4))):
        kiln.compile(f)(*args)
    # type() rather than isinstance(): a dead weak proxy among gc's objects raises on isinstance.
    # Only this file's: other tests' resume functions (whichever ran before) would make the count
    # depend on the test order.
    found = [o for o in gc.get_objects() if type(o) is types.FunctionType and ".__resume_at_" in o.__code__.co_qualname
             and o.__code__.co_filename == __file__]
    return found


def test_corpus_compiles():
    import importlib
    funcs = []
    for m in CORPUS_MODULES:
        funcs += list(_functions_of(importlib.import_module(m)))
    resumes = _resume_functions()
    funcs += resumes
    tried, ok, failures = 0, 0, []
    for f in funcs:
        tried += 1
        try:
            compiles(f.__code__, kiln.decompile(f))
            ok += 1
        except Exception as e:  # noqa: BLE001 - counted and listed
            failures.append(f"{f.__module__}.{f.__qualname__}: {type(e).__name__}: {str(e)[:200]}")
    print(f"corpus: tried {tried} (resume functions {len(resumes)}), compiled {ok}")
    print("\n".join(failures))
    assert tried >= 250 and len(resumes) >= 5
    # Measured 601/604 (99.5%); the rest are clear DecompileErrors (layouts the structurer cannot place).
    assert ok >= 0.98 * tried, "\n".join(failures)
    assert not [f for f in failures if "__resume_at_" in f], "kiln's own resume functions must decompile"


def _pure_cases():
    import colorsys, posixpath, textwrap as tw, fnmatch, shlex, heapq, statistics, string, difflib  # noqa: E401
    return [
        (colorsys.rgb_to_hsv, [(0.2, 0.4, 0.4), (1, 0, 0), (0, 0, 0)]), (colorsys.hsv_to_rgb, [(0.5, 0.5, 0.4), (0.1, 0, 1)]),
        (colorsys.rgb_to_hls, [(0.2, 0.4, 0.4), (1, 1, 1)]), (colorsys.hls_to_rgb, [(0.5, 0.3, 0.4), (0.9, 0.8, 0.1)]),
        (colorsys.rgb_to_yiq, [(0.2, 0.4, 0.4)]), (colorsys.yiq_to_rgb, [(0.5, 0.1, 0.1), (2, 2, 2)]),
        (colorsys._v, [(0.1, 0.9, 0.3), (0.1, 0.9, 0.8)]),
        (posixpath.join, [("a", "b"), ("/a", "/b", "c"), ("", "x")]), (posixpath.split, [("/a/b",), ("a",)]),
        (posixpath.splitext, [("a.tar.gz",), (".bashrc",)]), (posixpath.basename, [("/x/y",)]), (posixpath.dirname, [("/x/y",)]),
        (posixpath.normpath, [("/a/./b/../c//d",), ("",), ("../..",)]), (posixpath.isabs, [("/a",), ("a",)]),
        (posixpath.commonpath, [(["/a/b", "/a/c"],)]), (posixpath.relpath, [("/a/b/c", "/a/d")]),
        (posixpath.expanduser, [("x",)]), (posixpath.splitdrive, [("/a",)]), (posixpath.normcase, [("A",)]),
        (tw.dedent, [("   a\n   b\n",), ("  x\n\ty\n",)]), (tw.indent, [("a\n\nb\n", "> ")]),
        (tw.wrap, [("the quick brown fox jumps over the lazy dog", 10)]), (tw.shorten, [("hello   world foo bar", 12)]),
        (fnmatch.translate, [("*.py",), ("[!a-c]?x",)]), (fnmatch.fnmatchcase, [("a.py", "*.py")]), (fnmatch.filter, [(["a.py", "b.c"], "*.py")]),
        (shlex.quote, [("a b",), ("",), ("safe",)]), (shlex.split, [("a 'b c' d",)]), (shlex.join, [(["a", "b c"],)]),
        (heapq.nlargest, [(2, [5, 1, 7, 3])]), (heapq.nsmallest, [(2, [5, 1, 7, 3]), (1, [4, 2])]),
        (statistics.mean, [([1, 2, 3, 4],)]), (statistics.median, [([3, 1, 2],), ([4, 1, 2, 3],)]), (statistics.mode, [([1, 1, 2],)]),
        (statistics.stdev, [([1.0, 2.0, 4.0],)]), (statistics.variance, [([1, 2, 4],)]), (statistics.median_low, [([1, 2, 3, 4],)]),
        (string.capwords, [("hello  world",), ("a-b c", "-")]), (difflib.get_close_matches, [("appel", ["ape", "apple", "peach"])]),
    ]


def test_corpus_pure_functions_behave():
    tried, ok, failures = 0, 0, []
    for fn, inputs in _pure_cases():
        tried += 1
        try:
            check_behaviour(fn, kiln.decompile(fn), inputs)
            ok += 1
        except Exception as e:  # noqa: BLE001 - counted and listed
            failures.append(f"{fn.__module__}.{fn.__qualname__}: {type(e).__name__}: {str(e)[:300]}")
    print(f"pure corpus functions: tried {tried}, same behaviour {ok}")
    assert ok >= 0.9 * tried, "\n".join(failures)


def test_decompile_error_is_clear():
    async def coro(it):
        return [x async for x in it]  # rebuilt now (it was refused): no `await` before the comprehension
    assert kiln.decompile(coro).splitlines()[1].strip() == "return [x async for x in it]"

    def rest_pattern(v):
        match v:
            case {"k": x, **rest}:  # a mapping pattern's **rest is not rebuilt yet
                return rest
        return None
    with pytest.raises(kiln.DecompileError, match="MATCH_MAPPING"):
        kiln.decompile(rest_pattern)
    with pytest.raises(TypeError):
        kiln.decompile(42)


# ---- a large corpus by recompiled bytecode ------------------------------------------------------

def _corpus_tool():
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "decompiler_corpus.py")
    spec = importlib.util.spec_from_file_location("decompiler_corpus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_corpus_recompiles_to_the_same_bytecode():
    """Every function of ~40 standard-library modules and ~20 torch.nn/torch.optim modules
    (tools/decompiler_corpus.py): the decompiled source must compile, and recompiling it must give
    the original's bytecode for nearly all, and run in place of the original under the modules'
    workloads (tools/decompiler_behaviour.py) it must give the same results. Measured on 3.11:
    3775 of 3775 decompiled, 3718 the same bytecode; 1895 behaviour-checked (55 of the 57 with
    different bytecode), all the same."""
    tool = _corpus_tool()
    items = tool.corpus(os.path.dirname(torch.__file__))
    res = tool.decompile_all(items)
    codes = dict(items)
    for key, r in res.items():
        if r["status"] == "decompiled":
            r["compiles"], r["same"], r["why"] = tool.check(codes[key], r["src"], tool.IMPORTED[key.split(":")[0]])
    n = len(res)
    decompiled = [k for k, r in res.items() if r["status"] == "decompiled"]
    crashes = [f"{k}: {r['why']}" for k, r in res.items() if r["status"] == "crash"]
    no_compile = [f"{k}: {res[k]['why']}" for k in decompiled if not res[k]["compiles"]]
    same = sum(1 for k in decompiled if res[k]["same"])
    print(f"corpus: tried {n}, decompiled {len(decompiled)}, same bytecode {same}")
    assert n >= 3000
    assert not crashes, "\n".join(crashes[:20])
    assert not no_compile, "\n".join(no_compile[:20])
    assert len(decompiled) == n, [(k, r["why"]) for k, r in res.items() if r["status"] != "decompiled"][:20]
    assert same >= 0.984 * n
    behaved = tool.behaviour(codes, {k: res[k]["src"] for k in decompiled})
    checked = [k for k, (state, _) in behaved.items() if state != "not run"]
    differs = [f"{k}: {why}" for k, (state, why) in behaved.items() if state == "differs"]
    other = [k for k in checked if not res[k]["same"]]
    print(f"behaviour-checked {len(checked)} ({len(other)} of {len(decompiled) - same} with different bytecode), differ {len(differs)}")
    assert not differs, "\n".join(differs[:20])
    assert len(checked) >= 1800
    assert len(other) >= 0.9 * (len(decompiled) - same)
    # Layouts that were refused or rebuilt wrong, each found in this corpus: a finally block ending
    # in an if dropped the code after the try (make_archive returned None); a break ending an if
    # branch with a nested if jumping past it (_wrap_chunks); an except block falling through past
    # an elif (copyfile); a while loop's final test leaving into a copy of `return None`
    # (_format_items). Each must now decompile and behave the same.
    for key in ("python3.11/shutil.py:make_archive:1083", "python3.11/textwrap.py:TextWrapper._wrap_chunks:238",
                "python3.11/shutil.py:copyfile:226", "python3.11/pprint.py:PrettyPrinter._format_items:413"):
        assert key in res and behaved.get(key, ["missing"])[0] == "same", (key, res.get(key), behaved.get(key))
    # Structural differences fixed (the source was equivalent, its bytecode not): `a, b = s = v`
    # (get_matching_blocks), a break ending a try body in a while True loop (all_tasks), a `return
    # True` in a try nested in a try/finally (Condition.wait: it was printed after the outer try).
    for key in ("python3.11/difflib.py:SequenceMatcher.get_matching_blocks:421", "asyncio/tasks.py:all_tasks:42",
                "asyncio/locks.py:Condition.wait:248"):
        assert res[key]["same"], (key, res[key])


PY312 = os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python")


@pytest.mark.skipif(not os.path.exists(PY312), reason="no 3.12 interpreter to record and recompile with")
def test_corpus_312_recompiles_to_the_same_bytecode(tmp_path):
    """The same corpus as 3.12 bytecode: a 3.12 interpreter describes each function, kiln
    decompiles the descriptions here, and the 3.12 interpreter recompiles, compares and runs the
    workloads (no torch there: torch's functions are not run). Measured: 3784 of 3786 decompiled,
    3647 the same bytecode; 1510 behaviour-checked (110 of the 137 with different bytecode), all
    the same; the 2 DecompileErrors: PEP 695 generic class bodies decompiled alone (typing
    SupportsAbs, SupportsRound), whose type parameters live in the enclosing scope."""
    import subprocess
    tool_path = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "decompiler_corpus.py")
    out = tmp_path / "c.json"
    r = subprocess.run([sys.executable, tool_path, "--py312", PY312, "--behaviour", "--show", "0", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.load(open(out))["3.12"]
    n = len(res)
    decompiled = [k for k, v in res.items() if v["status"] == "decompiled"]
    no_compile = [f"{k}: {res[k]['why']}" for k in decompiled if not res[k].get("compiles")]
    same = sum(1 for k in decompiled if res[k].get("same"))
    print(r.stdout)
    assert n >= 3000
    assert not no_compile, "\n".join(no_compile[:20])
    assert n - len(decompiled) <= 2, [(k, v["why"]) for k, v in res.items() if v["status"] != "decompiled"]
    assert same >= 0.963 * n
    differs = [f"{k}: {v['behaviour_why']}" for k, v in res.items() if v.get("behaviour") == "differs"]
    assert not differs, "\n".join(differs[:20])
    checked = [k for k, v in res.items() if v.get("behaviour") in ("same", "differs")]
    assert len(checked) >= 1400
    assert sum(1 for k in checked if not res[k].get("same")) >= 100
    # 3.12 layouts that were refused: an except block placed after the code falling through past an
    # elif (copyfile); a while loop's final test jumping to a copy of `return None` (_format_items,
    # Path.walk); an if branch jumping straight to where the enclosing if/elif chain goes on
    # (Fraction.__new__, _EnumDict.__setitem__); a try whose body is a nested try, protected only
    # where the nested handler is placed (__set_name__); with blocks' handlers placed after a
    # finally copy's return (_unpack_zipfile); a try/finally in a finally block (__eager_start);
    # a finally block's if inverted around a loop's back edge (_rmtree_safe_fd); a while loop's
    # final test placed after the handler of the try that is its body (heapq.merge); a finally
    # block's loop whose handler and back edge the normal copy places after the code (asyncio
    # Condition.wait). Each must decompile and behave the same.
    for key in ("python3.12/shutil.py:copyfile:230", "python3.12/pprint.py:PrettyPrinter._format_items:413",
                "python3.12/pathlib.py:Path.walk:1112", "python3.12/fractions.py:Fraction.__new__:186",
                "python3.12/enum.py:_EnumDict.__setitem__:383", "python3.12/enum.py:_proto_member.__set_name__:249",
                "python3.12/shutil.py:_unpack_zipfile:1259", "asyncio/tasks.py:Task.__eager_start:272",
                "python3.12/shutil.py:_rmtree_safe_fd:643", "python3.12/heapq.py:merge:316",
                "asyncio/locks.py:Condition.wait:247"):
        assert res.get(key, {}).get("behaviour") == "same", (key, res.get(key))
    # A try/finally inside a try/except: 3.12's layout was rebuilt with the code after the outer
    # try moved inside it (wrong source), then refused; now the outer body ends before the handlers
    # of the tries nested in it, and it recompiles to the same bytecode.
    assert res["asyncio/locks.py:Lock.acquire:92"].get("same"), res["asyncio/locks.py:Lock.acquire:92"]
    # A class body holding a PEP 695 generic method (its `<generic parameters of __call__>` scope)
    # was refused; now it recompiles to the same bytecode.
    assert res["python3.12/typing.py:_IdentityCallable:3301"].get("same"), res["python3.12/typing.py:_IdentityCallable:3301"]
    # Structural differences fixed: `except KeyError: pass` ending a while True body was printed as
    # `continue` in the except and an else clause (_commit_removals, JSONArray); Condition.wait's
    # `return True` in a try nested in a try/finally was printed after the outer try; `return x if c
    # else None` was printed as an if statement (currentframe).
    for key in ("python3.12/weakref.py:WeakKeyDictionary._commit_removals:387", "json/decoder.py:JSONArray:217",
                "asyncio/locks.py:Condition.wait:247", "python3.12/inspect.py:currentframe:1768"):
        assert res[key].get("same"), (key, res[key])


@pytest.mark.skipif(not os.path.exists(PY312), reason="no 3.12 interpreter to record the bytecode with")
def test_312_generic_scopes(tmp_path):
    """PEP 695 generics (3.12): a generic class body's type parameters live in a `<generic
    parameters of ...>` annotation scope that the body alone does not hold (their kinds, bounds and
    order: a header guessed from the names the body reads could behave differently); decompiling
    the body alone is a clear DecompileError (typing.SupportsAbs), decompiling the code that holds
    the class statement rebuilds it (test_312_generic_scopes_round_trip). A class body's generic method is rebuilt from its
    scope (typing._IdentityCallable was refused), and a 3.12 class body that only reads free
    variables (LOAD_LOCALS; LOAD_FROM_DICT_OR_DEREF) decompiles."""
    import subprocess
    src = ("class G[T]:\n    x: T\n"
           "class H:\n    def m[T](self, a: T) -> T:\n        return a\n"
           "def outer(flag):\n    class C:\n        y = flag\n    return C\n")
    prog = ("import sys, json; sys.path.insert(0, sys.argv[2]); import gen_decompiler_fixtures as g\n"
            "ns = {}; exec(sys.argv[1], ns)\n"
            "cls_body = lambda f: [c for c in f.co_consts if hasattr(c, 'co_code') and c.co_name == 'C'][0]\n"
            "gen = [c for c in compile(sys.argv[1], 's', 'exec').co_consts if hasattr(c, 'co_code')]\n"
            "G = [c for c in gen[0].co_consts if hasattr(c, 'co_code')][0]\n"
            "print(json.dumps({'G': g.code_desc(G), 'H': g.code_desc(gen[1]), 'C': g.code_desc(cls_body(ns['outer'].__code__))}))")
    tools = os.path.join(os.path.dirname(__file__), "..", "..", "tools")
    r = subprocess.run([PY312, "-c", prog, src, tools], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    descs = json.loads(r.stdout)
    with pytest.raises(kiln.DecompileError, match="generic"):
        kiln._C.decompile(descs["G"], [], [])
    assert kiln._C.decompile(descs["H"], [], []).splitlines()[1].strip() == "def m[T](self, a: T) -> T:"
    assert kiln._C.decompile(descs["C"], [], []).splitlines()[1].strip() == "y = flag"


# Generic functions and classes (PEP 695, 3.12 syntax, so not among decompiler_cases.py's cases,
# which 3.11 imports): type variables, *Ts and **P, bounds and constraints (lazily evaluated code
# objects), defaults passed into the generic scope, decorators, methods reading the class
# namespace; a generic class's bases, keywords and docstring around its Generic[...] base.
GENERIC_DEFS = """
def generic_defs(x):
    class Box:
        def get[T, *Ts, **P](self, a: T, *b: *Ts) -> T:
            return a
        def n[U: int, V: (str, bytes)](self, v: U = 1, *, w: V = "s") -> V:
            return (v, w)
    def first[T](items: list[T]) -> T:
        return items[0]
    def deco(f):
        f.tagged = True
        return f
    @deco
    def pair[K, V](k: K, v: V = None) -> tuple[K, V]:
        return (k, v)
    b = Box()
    return (b.get(x), b.n(x), first([x, 2]), pair(x), pair.tagged,
            [p.__name__ for p in Box.get.__type_params__], Box.n.__type_params__[0].__bound__,
            Box.n.__type_params__[1].__constraints__, pair.__annotations__["return"].__args__[0].__name__,
            repr(first.__annotations__))

def generic_classes(x):
    class Base:
        pass
    class Meta(type):
        pass
    def deco(c):
        c.tagged = True
        return c
    @deco
    class Box[T: (int, str), *Ts](Base, metaclass=Meta):
        \"\"\"A box.\"\"\"
        kind: T
        def get(self, v: T) -> tuple[T, *Ts]:
            return (v,)
    class Pair[K, V]:
        def swap(self, k: K, v: V) -> "Pair[V, K]":
            return (v, k)
    return (Box().get(x), Pair().swap(x, 2), Box.tagged, type(Box).__name__, Box.__doc__,
            [p.__name__ for p in Box.__type_params__], Box.__type_params__[0].__constraints__,
            [b.__name__ for b in Box.__mro__], repr(Box.__annotations__), Pair.__orig_bases__[0].__args__[0].__name__)
"""


@pytest.mark.skipif(not os.path.exists(PY312), reason="no 3.12 interpreter to record, recompile and run with")
@pytest.mark.parametrize("name, headers", [
    ("generic_defs", ["def get[T, *Ts, **P](self, a: T, *b: *Ts) -> T:",
                      "def n[U: int, V: (str, bytes)](self, v: U = 1, *, w: V = 's') -> V:"]),
    ("generic_classes", ["class Box[T: (int, str), *Ts](Base, metaclass=Meta):", "class Pair[K, V]:"])])
def test_312_generic_scopes_round_trip(name, headers):
    """Generic functions and classes rebuilt from their `<generic parameters of f>` scopes
    recompile (3.12) to the same bytecode and return the same values."""
    import subprocess
    tools = os.path.join(os.path.dirname(__file__), "..", "..", "tools")
    prog = ("import sys, json; sys.path.insert(0, sys.argv[2]); import gen_decompiler_fixtures as g, decompiler_corpus as dc\n"
            "ns = {}; exec(sys.argv[1], ns); f = ns[sys.argv[3]]\n"
            "if len(sys.argv) == 4: print(json.dumps(g.code_desc(f.__code__))); sys.exit()\n"
            "new = {}; exec(sys.argv[4], new)\n"
            "print(json.dumps([list(dc.check(f.__code__, sys.argv[4])), repr(f(3)) == repr(new[sys.argv[3]](3)), repr(f('a'))]))")
    r = subprocess.run([PY312, "-c", prog, GENERIC_DEFS, tools, name], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    src = kiln._C.decompile(json.loads(r.stdout), [], [])
    for h in headers:
        assert h in src, src
    r = subprocess.run([PY312, "-c", prog, GENERIC_DEFS, tools, name, src], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    (compiles, same, why), behaves, _ = json.loads(r.stdout)
    assert compiles and same and behaves, (why, src)


# The layout cases of decompiler_cases_layouts.py must also recompile to the same bytecode (a
# structural difference behaves the same, so the behaviour tests above cannot see it): on 3.11
# here, on 3.12 from the recorded fixtures, compared by the 3.12 interpreter.
# Known structural difference (same behaviour): 3.12 places the code after a while True loop at its
# only break, inside the loop, where it is printed.
import decompiler_cases_layouts  # noqa: E402
SAME_BYTECODE = sorted(n for n, (f, _) in decompiler_cases.CASES.items() if f.__module__ == decompiler_cases_layouts.__name__)
NOT_SAME_311 = set()
NOT_SAME_312 = {"break_ending_a_try_in_a_loop"}


def test_layout_cases_recompile_to_the_same_bytecode():
    tool = _corpus_tool()
    assert len(SAME_BYTECODE) >= 4
    for name in sorted(set(SAME_BYTECODE) - NOT_SAME_311):
        fn = decompiler_cases.CASES[name][0]
        compiles, same, why = tool.check(fn.__code__, kiln.decompile(fn))
        assert compiles and same, (name, why)


@pytest.mark.skipif(not os.path.exists(PY312), reason="no 3.12 interpreter to recompile with")
def test_312_layout_cases_recompile_to_the_same_bytecode():
    import subprocess
    recorded = _recorded()["functions"]
    srcs = {n: kiln._C.decompile(recorded[n]["code"], [], []) for n in sorted(set(SAME_BYTECODE) - NOT_SAME_312)}
    here = os.path.dirname(__file__)
    prog = ("import sys, json; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "import decompiler_cases as c, decompiler_corpus as dc\n"
            "srcs = json.loads(sys.stdin.read())\n"
            "print(json.dumps({n: dc.check(c.CASES[n][0].__code__, s) for n, s in srcs.items()}))")
    r = subprocess.run([PY312, "-c", prog, here, os.path.join(here, "..", "..", "tools")], input=json.dumps(srcs),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    for name, (compiles, same, why) in json.loads(r.stdout).items():
        assert compiles and same, (name, why, srcs[name])
