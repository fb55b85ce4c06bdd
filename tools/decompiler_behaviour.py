"""Behaviour check of the decompiler corpus: run decompiled code in place of the original.

For each workload of tools/decompiler_workloads.py (a program driving one or more corpus modules
on fixed inputs), every live function of those modules whose decompiled source compiled gets the
recompiled code object in place of its own (`fn.__code__ = new`, on every function object that
shares the code, nested functions following their parent), the workload runs again, and its
result is compared with the original run's. A function counts as run when its replaced code
executed (a profile hook sees its frames). When the results differ, each run function is replaced
alone to find the one that changes the result.

Results per corpus key: ["same" | "differs" | "not run", why]. Class bodies ran when their module
was imported and are not re-run. Runs under 3.11 and 3.12 (no kiln import); called by
tools/decompiler_corpus.py in the process that compiled the code."""
import collections
import copy
import gc
import importlib
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")


def canon(value):
    """The workload's result as text without object addresses."""
    return ADDRESS.sub("", repr(value))


def run(workload):
    with _quiet():
        try:
            return canon(("ok", workload()))
        except BaseException as e:  # noqa: BLE001 - the exception is the result
            return canon(("raise", type(e).__name__, str(e)))


def nested_pairs(orig, new, out):
    """Pairs (original code, recompiled code) of the nested functions, matched by name in order."""
    a = [c for c in orig.co_consts if isinstance(c, types.CodeType)]
    b = [c for c in new.co_consts if isinstance(c, types.CodeType)]
    if [c.co_name for c in a] != [c.co_name for c in b]:
        return
    for x, y in zip(a, b):
        out.append((x, y))
        nested_pairs(x, y, out)


def dressed(orig, new):
    """The recompiled code with the original's names, file and first line (function reprs and
    qualnames of closures it creates then read the same, and decorators that read a function's
    source, such as torch's @overload, find the original); nested code objects likewise."""
    consts = list(new.co_consts)
    a = [c for c in orig.co_consts if isinstance(c, types.CodeType)]
    b = [k for k, c in enumerate(consts) if isinstance(c, types.CodeType)]
    if len(a) == len(b) and all(a[i].co_name == consts[k].co_name for i, k in enumerate(b)):
        for i, k in enumerate(b):
            consts[k] = dressed(a[i], consts[k])
    return new.replace(co_qualname=orig.co_qualname, co_filename=orig.co_filename, co_firstlineno=orig.co_firstlineno,
                       co_consts=tuple(consts))


def live_functions():
    out = collections.defaultdict(list)
    for o in gc.get_objects():
        if type(o) is types.FunctionType:
            c = o.__code__
            f = c.co_filename if c.co_filename.startswith("<") else os.path.realpath(c.co_filename)
            out[(f, c.co_qualname, c.co_firstlineno)].append(o)
    return out


def key_of(path, code):
    return f"{path}:{code.co_qualname}:{code.co_firstlineno}"


def check(codes, sources, module_of, recompiled):
    """codes: corpus key -> original code; sources: key -> decompiled source (decompiled keys only);
    module_of: source path (the key's first part) -> (import name, file, imported names);
    recompiled(code, src, imported) -> the code object the source defines."""
    sys.path.insert(0, HERE)
    global W
    import decompiler_workloads as W
    res = {}
    groups = collections.defaultdict(list)  # workload -> keys
    for key in sources:
        path = key.split(":")[0]
        name = module_of[path][0]
        code = codes[key]
        if not code.co_flags & 0x02 and "<locals>" not in code.co_qualname:  # a class body at module level
            continue  # run below
        elif name not in W.WORKLOADS:
            res[key] = ["not run", "no workload for " + name]
        else:
            groups[W.WORKLOADS[name]].append(key)
    for name, _f, _i in module_of.values():
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    live = live_functions()
    for workload, keys in groups.items():
        check_group(workload, keys, codes, sources, module_of, recompiled, live, res)
    for key in sources:
        if key not in res:
            res[key] = check_class_body(key, codes[key], sources[key], module_of, recompiled)
    return res


def describe(v):
    """A class namespace's value as comparable text: functions by their signature data (their
    bodies are run by the workloads), classes by name and members, other values by repr."""
    if isinstance(v, (staticmethod, classmethod)):
        return (type(v).__name__, describe(v.__func__))
    if isinstance(v, property):
        return ("property", describe(v.fget), describe(v.fset), describe(v.fdel), v.__doc__)
    if isinstance(v, types.FunctionType):
        c = v.__code__
        return ("function", v.__name__, canon(v.__defaults__), canon(v.__kwdefaults__), canon(v.__annotations__), sorted(v.__dict__),
                v.__doc__, c.co_argcount, c.co_kwonlyargcount, c.co_flags & 0x3ff)
    if isinstance(v, type):
        return ("class", v.__name__, sorted(v.__dict__))
    if isinstance(v, types.CellType):
        return "cell"
    if isinstance(v, (set, frozenset)):  # (equal sets built in another order iterate in another order)
        return (type(v).__name__, sorted(map(canon, v)))
    return canon(v)


def class_namespace(code, module):
    ns = {}
    try:
        exec(code, vars(module), ns)
    except Exception as e:  # noqa: BLE001 - the exception is the result
        return ("raise", type(e).__name__, str(e))
    nested = "." in code.co_qualname  # compiled at top level, its own __qualname__ is its last name
    return sorted((k, describe(v)) for k, v in ns.items() if not (nested and k == "__qualname__"))


def check_class_body(key, code, src, module_of, recompiled):
    """A module-level class body (nested classes included): run the original and the recompiled
    body in the module's globals and compare the namespaces they build."""
    name, _file, imported = module_of[key.split(":")[0]]
    try:
        module = importlib.import_module(name)
        new = dressed(code, recompiled(code, src, imported))
    except Exception as e:  # noqa: BLE001 - reported
        return ["not run", f"no code: {type(e).__name__}: {e}"]
    with _quiet():
        a, b = class_namespace(code, module), class_namespace(new, module)
    if a == b:
        return ["same", ""]
    return ["differs", first_difference(canon(a), canon(b))]


def _quiet():
    import contextlib
    import io
    import warnings
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def check_direct(code, src, imported, name, inputs, recompiled):
    """A module function its C implementation replaced (posixpath.normpath on 3.12): the original
    and the recompiled code as functions in the module's globals, called on the inputs."""
    module = importlib.import_module(name)
    try:
        new = dressed(code, recompiled(code, src, imported))
    except Exception as e:  # noqa: BLE001 - reported
        return ["not run", f"no code: {type(e).__name__}: {e}"]
    a, b = types.FunctionType(code, vars(module)), types.FunctionType(new, vars(module))
    for args in inputs:
        # (each call on its own copy of the arguments, which it may change, and the arguments after)
        x, y = copy.deepcopy(args), copy.deepcopy(args)
        ra, rb = run(lambda: (a(*x), x)), run(lambda: (b(*y), y))
        if ra != rb:
            return ["differs", f"{args!r}: {first_difference(ra, rb)}"]
    return ["same", ""]


W = None


def check_group(workload, keys, codes, sources, module_of, recompiled, live, res):
    swaps = {}  # key -> [(function object, original code, new code)]
    watch = {}  # id(new code) -> key
    keep = []
    by_key = {key_of(k.split(":")[0], codes[k]): k for k in keys}
    for key in keys:
        path = key.split(":")[0]
        name, file, imported = module_of[path]
        code = codes[key]
        # (a frozen module's functions, posixpath's say, name their file `<frozen posixpath>`)
        fns = (live.get((os.path.realpath(file), code.co_qualname, code.co_firstlineno)) or
               live.get((f"<frozen {name}>", code.co_qualname, code.co_firstlineno), []))
        if not fns and (name, code.co_qualname) in W.DIRECT:
            res[key] = check_direct(code, sources[key], imported, name, W.DIRECT[(name, code.co_qualname)], recompiled)
            continue
        if not fns:
            res.setdefault(key, ["not run", "no live function (replaced by a C implementation, or nested in one not run)"])
            continue
        try:
            new = dressed(code, recompiled(code, sources[key], imported))
        except Exception as e:  # noqa: BLE001 - reported
            res[key] = ["not run", f"no code: {type(e).__name__}: {e}"]
            continue
        new = new.replace(co_flags=new.co_flags | (fns[0].__code__.co_flags & 0x100))  # types.coroutine's flag
        if new.co_freevars != fns[0].__code__.co_freevars:
            res[key] = ["not run", f"free variables {new.co_freevars} vs {fns[0].__code__.co_freevars}"]
            continue
        swaps[key] = [(f, f.__code__, new) for f in fns]
        watch[id(new)] = key
        keep.append(new)
        pairs = []
        nested_pairs(code, new, pairs)
        for o, n in pairs:
            k = by_key.get(key_of(path, o))
            if k is not None:
                watch[id(n)] = k
                keep.append(n)
    base = run(workload)
    if run(workload) != base:
        for key in keys:
            res.setdefault(key, ["not run", "workload not deterministic"])
        return
    hit, result = swapped_run(workload, list(swaps), swaps, watch)
    for key in keys:
        if key in hit:
            res[key] = ["same", ""]
        else:
            res.setdefault(key, ["not run", "the workload does not reach it"])
    if result == base:
        return
    blamed = False
    for key in sorted(hit):
        owner = key if key in swaps else None
        if owner is None:
            continue  # a nested function: blamed through its parent
        _, alone = swapped_run(workload, [owner], swaps, watch)
        if alone != base:
            res[key] = ["differs", first_difference(base, alone)]
            blamed = True
    if not blamed:
        for key in hit:
            res[key] = ["differs", "only with all replaced: " + first_difference(base, result)]


def swapped_run(workload, which, swaps, watch):
    hit = set()

    def prof(frame, event, arg):
        if event == "call":
            k = watch.get(id(frame.f_code))
            if k is not None:
                hit.add(k)
    for key in which:
        for f, _old, new in swaps[key]:
            f.__code__ = new
    sys.setprofile(prof)
    try:
        result = run(workload)
    finally:
        sys.setprofile(None)
        for key in which:
            for f, old, _new in swaps[key]:
                f.__code__ = old
    return hit, result


def first_difference(a, b):
    k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    return f"...{a[max(0, k - 60):k + 60]!r} vs ...{b[max(0, k - 60):k + 60]!r}"
