"""Record the 3.12 bytecode of tests/python/decompiler_cases.py for the decompiler tests.

Run with a 3.12 interpreter (no kiln or torch needed):
    ~/.pyenv/versions/3.12.1/bin/python tools/gen_decompiler_fixtures.py
Writes tests/python/data/decompiler_312.json: for each case, the code object described with the
fields of kiln's CodeDesc (csrc/frontend/decompiler/code_desc.h; bytes base64-encoded), which
kiln._C.decompile accepts in place of a code object."""
import base64, json, math, os, sys, types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import decompiler_cases  # noqa: E402


def const(c):
    d = {"kind": "value", "source": "", "is_str": False, "is_none": c is None, "str": "", "items": [], "code": None}
    if isinstance(c, types.CodeType):
        d.update(kind="code", source="<code>", code=code_desc(c))
    elif isinstance(c, bool) or c is None or c is Ellipsis:
        d["source"] = {True: "True", False: "False", None: "None", Ellipsis: "..."}[c]
    elif isinstance(c, float):
        d["source"] = "float('nan')" if math.isnan(c) else ("float('inf')" if c > 0 else "-float('inf')") if math.isinf(c) else repr(c)
    elif isinstance(c, complex):
        r = repr(c)
        d["source"] = f"complex('{r}')" if ("inf" in r or "nan" in r) else r
    elif isinstance(c, str):
        d.update(is_str=True, source=repr(c), str=c.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    elif isinstance(c, (tuple, frozenset)):
        items = list(c) if isinstance(c, tuple) else sorted(c, key=repr)
        d["items"] = [const(i) for i in items]
        body = ", ".join(i["source"] for i in d["items"])
        if isinstance(c, tuple):
            d.update(kind="tuple", source=f"({body},)" if len(items) == 1 else f"({body})")
        else:
            d.update(kind="frozenset", source=f"frozenset({{{body}}})" if items else "frozenset()")
    else:
        d["source"] = repr(c)
    return d


def code_desc(co):
    upper = len(co.co_varnames) + len(co.co_cellvars) + len(co.co_freevars)
    localsplus = []
    for i in range(upper):
        try:
            localsplus.append(co._varname_from_oparg(i))
        except Exception:
            break
    return {"py_minor": sys.version_info[1], "name": co.co_name, "qualname": co.co_qualname,
            "code": base64.b64encode(co.co_code).decode(), "exception_table": base64.b64encode(co.co_exceptiontable).decode(),
            "names": list(co.co_names), "localsplus": localsplus, "varnames": list(co.co_varnames),
            "cellvars": list(co.co_cellvars), "freevars": list(co.co_freevars), "consts": [const(c) for c in co.co_consts],
            "argcount": co.co_argcount, "posonlyargcount": co.co_posonlyargcount, "kwonlyargcount": co.co_kwonlyargcount,
            "flags": co.co_flags, "firstlineno": co.co_firstlineno}


def main():
    out = {"python": "%d.%d.%d" % sys.version_info[:3], "functions": {}}
    for name, (fn, _) in sorted(decompiler_cases.CASES.items()):
        out["functions"][name] = {"code": code_desc(fn.__code__), "defaults": [repr(v) for v in (fn.__defaults__ or ())],
                                  "kwdefaults": [[k, repr(v)] for k, v in (fn.__kwdefaults__ or {}).items()]}
    path = os.path.join(HERE, "..", "tests", "python", "data", "decompiler_%d%d.json" % sys.version_info[:2])
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print("wrote", path, len(out["functions"]), "functions")


if __name__ == "__main__":
    main()
