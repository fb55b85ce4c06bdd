"""Keeps PyTorch's Python meta kernels from importing torch._dynamo on kiln's first capture.

kiln's frontend propagates shapes by running operators on meta tensors. In PyTorch 2.13 many
of those operators' meta kernels are Python references (torch._refs: layer_norm, var_mean,
gelu, rsqrt...) wrapped in `torch._disable_dynamo`, whose wrapper imports all of torch._dynamo
(about 2 s here) on its first call only to build `torch._dynamo.disable(fn)`. Disabling Dynamo
is a no-op while Dynamo is not loaded, so before kiln's first capture each such wrapper gets a
pre-built stand-in that calls the function directly while torch._dynamo is absent and otherwise
builds and keeps the real `torch._dynamo.disable(fn)`. Behaviour is unchanged either way; only
the import is no longer forced. Wrappers created later keep PyTorch's own lazy path.
"""
from __future__ import annotations

import gc
import sys
import types

_done = False


def _stand_in(fn, recursive):
    def call(*args, **kwargs):
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is None or not hasattr(dynamo, "disable"):
            return fn(*args, **kwargs)
        real = dynamo.disable(fn, recursive, wrapping=False)
        fn.__dynamo_disable = real
        return real(*args, **kwargs)
    return call


def avoid_dynamo_import() -> int:
    """Installs the stand-ins once per process; returns how many wrappers got one."""
    global _done
    if _done or "torch._dynamo" in sys.modules:
        _done = True
        return 0
    _done = True
    try:
        import torch._compile as tc
        code = tc._disable_dynamo(lambda: None).__code__
    except Exception:  # a PyTorch without this helper: nothing to do
        return 0
    if set(code.co_freevars) != {"fn", "recursive"}:
        return 0
    count = 0
    for obj in gc.get_objects():
        if type(obj) is not types.FunctionType or obj.__code__ is not code:
            continue
        cells = dict(zip(code.co_freevars, obj.__closure__ or ()))
        fn = cells["fn"].cell_contents
        if getattr(fn, "__dynamo_disable", None) is None:
            fn.__dynamo_disable = _stand_in(fn, cells["recursive"].cell_contents)
            count += 1
    return count
