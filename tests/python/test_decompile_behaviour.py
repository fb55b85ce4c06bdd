"""The corpus behaviour check itself (tools/decompiler_behaviour.py): it must catch decompiled
source that behaves differently, in a function a workload runs, in a module function called
directly, and in a class body; the corpus-wide runs are in test_decompiler.py."""
import importlib.util
import os
import sys
import types

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(module, qualname, src):
    """The behaviour check's verdict on `src` given as the decompiled source of module.qualname."""
    corpus = _tool("decompiler_corpus")
    sys.path.insert(0, TOOLS)
    import decompiler_behaviour
    mod = importlib.import_module(module)
    path = "x/" + module + ".py"
    with open(mod.__file__) as f:
        top = compile(f.read(), mod.__file__, "exec")
    found = []
    corpus.walk(top, path, found)
    codes = {k: c for k, c in found if c.co_qualname == qualname}
    assert len(codes) == 1, codes
    key = next(iter(codes))
    res = decompiler_behaviour.check(codes, {key: src}, {path: (module, mod.__file__, [])}, corpus.recompiled)
    return res[key]


def test_a_wrong_function_run_by_a_workload_is_caught():
    wrong = "def dedent(text):\n    return text\n"
    assert _check("textwrap", "dedent", wrong)[0] == "differs"
    # the check ran the replacement (the workload calls textwrap.dedent) and restored the original
    import textwrap as tw
    assert tw.dedent("  a\n  b") == "a\nb"


def test_the_right_source_is_the_same():
    import kiln
    import textwrap as tw
    assert _check("textwrap", "TextWrapper._split", kiln.decompile(tw.TextWrapper._split)) == ["same", ""]


def test_a_wrong_direct_call_is_caught():
    wrong = "def truth(a):\n    return not a\n"
    assert _check("operator", "truth", wrong)[0] == "differs"


def test_a_wrong_class_body_is_caught():
    import kiln
    import shlex
    src = kiln.decompile(_class_code(shlex, "shlex"))
    assert _check("shlex", "shlex", src) == ["same", ""]
    wrong = src.replace("def read_token(self):", "def read_token(self, extra=1):")
    assert wrong != src
    assert _check("shlex", "shlex", wrong)[0] == "differs"


def _class_code(module, name):
    with open(module.__file__) as f:
        top = compile(f.read(), module.__file__, "exec")
    return next(c for c in top.co_consts if isinstance(c, types.CodeType) and c.co_name == name)

