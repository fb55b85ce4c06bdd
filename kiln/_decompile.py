"""kiln.decompile: Python source from a function's or code object's bytecode (CPython 3.11/3.12).

The decompiler is C++ (csrc/frontend/decompiler/); this module only picks the code object and
the function's defaults. A construct it cannot rebuild raises DecompileError (a ValueError)
naming the construct and the bytecode offset; it never returns source it could not check.
"""
from __future__ import annotations

import types

from . import _C

DecompileError = _C.DecompileError


def decompile(fn_or_code) -> str:
    """Source of a `def` statement equivalent to the function or code object.

    Default values of a function are rendered with repr() where that reads back; the source of a
    closure uses its free variables by name (compile it inside a scope that defines them)."""
    fn = fn_or_code
    if isinstance(fn, (classmethod, staticmethod)):
        fn = fn.__func__
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    code = fn if isinstance(fn, types.CodeType) else getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"decompile() needs a function or code object, not {type(fn_or_code).__name__}")
    defaults: list[str] = []
    kwdefaults: list[tuple[str, str]] = []
    if isinstance(fn, types.FunctionType):
        defaults = [_default_source(v) for v in (fn.__defaults__ or ())]
        kwdefaults = [(k, _default_source(v)) for k, v in (fn.__kwdefaults__ or {}).items()]
    return _C.decompile(code, defaults, kwdefaults)


def _default_source(value) -> str:
    text = repr(value)
    try:
        if eval(text, {}) == value:  # noqa: S307 - literals only, no names in scope
            return text
    except Exception:
        pass
    # not a literal: a placeholder name, documented in decompile()'s docstring
    return f"__default_{type(value).__name__}"
