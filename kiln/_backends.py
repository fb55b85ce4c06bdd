"""Backend registry. A backend is a name or a callable (torch.fx.GraphModule, example_inputs)
-> callable, exactly torch.compile's custom-backend contract.

Built-in names: "eager" runs the captured graph op by op from C++ (kiln._C.EagerGraph);
"kiln" is the code generator (kiln._codegen); "aot_eager" goes through kiln's ATen tracer and
autograd layer (joint forward/backward, partitioner) and runs the resulting ATen graphs op by op,
no generated code: the backend to tell a frontend bug from a code generator bug.
"""
from __future__ import annotations

from typing import Callable

from . import _ddp, _debug, _fx

_BUILTIN = {
    "eager": "captured graph run op by op from C++",
    "aot_eager": "ATen graphs from kiln's tracer and autograd layer, run op by op (no generated code)",
    "kiln": "kiln's code generator: ATen tracing, fusion, generated C++ kernels; training graphs as a compiled forward/backward pair",
}
_CUSTOM: dict[str, Callable] = {}


def register_backend(name: str, fn: Callable) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError("kiln.register_backend: name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"kiln.register_backend: backend {name!r} must be callable (gm, example_inputs) -> callable")
    if name in _BUILTIN:
        raise ValueError(f"kiln.register_backend: {name!r} is a built-in backend")
    _CUSTOM[name] = fn


def list_backends() -> list[str]:
    return sorted(set(_BUILTIN) | set(_CUSTOM))


def resolve(backend) -> tuple[object, str]:
    """(callable or None for the built-in C++ runner, display name)."""
    if callable(backend):
        return backend, getattr(backend, "__name__", type(backend).__name__)
    if not isinstance(backend, str):
        raise TypeError(f"kiln.compile: backend must be a name or a callable, got {type(backend).__name__}")
    if backend in ("kiln", "aot_eager"):
        from . import _codegen
        return (_codegen.compile_frontend_fx if backend == "kiln" else _codegen.compile_aot_eager_fx), backend
    if backend in _BUILTIN:
        return None, backend
    if backend in _CUSTOM:
        return _CUSTOM[backend], backend
    raise ValueError(f"kiln.compile: unknown backend {backend!r}; available: {', '.join(list_backends())}")


def describe(name: str) -> str:
    return _BUILTIN.get(name, "custom backend")


def fx_compile(backend, rows, example_inputs, name, debug_folder=None):
    """Called by the C++ core for callable backends: build the fx graph, hand it over. With a
    debug dump on, `debug_folder` is this capture's folder (kiln/_debug.py)."""
    gm = _fx.to_graph_module(rows)
    if debug_folder is not None:
        _debug.steppable(gm, debug_folder)
        _debug.note_file(debug_folder, "graph_module.py")
    cap = _ddp.active_bucket_cap()
    with _debug.compiling_for(debug_folder):
        compiled = backend(gm, example_inputs) if cap is None else _ddp.compile_by_buckets(gm, example_inputs, backend, cap)
    if not callable(compiled):
        raise TypeError(f"kiln: backend {backend!r} returned {type(compiled).__name__}, not a callable")
    return compiled


def python_graph(gm, example_inputs):
    """backend="eager" with a debug dump on: the graph's Python form itself, so a debugger steps
    through it (its forward: a GraphModule has no hooks for nn.Module's call machinery to run)."""
    return gm.forward


def dynamo_backend(gm, example_inputs):
    """kiln as a backend for PyTorch's own Dynamo: torch.compile(m, backend=kiln.backend)."""
    from . import _codegen
    return _codegen.compile_fx(gm, example_inputs)
