"""kiln: a PyTorch 2 compiler stack with a C++ core.

    import kiln
    model = kiln.compile(model)            # or @kiln.compile / @kiln.compile(fullgraph=True)
    kiln.stats(); kiln.explain(fn)(*args); kiln.reset()
"""
from __future__ import annotations

import atexit
import functools
import os
import sys
import sysconfig

import torch

from . import _C, _backends, _debug, _logging, _meta_kernels, _options
from ._backends import list_backends, register_backend
from ._module import CompiledModule
from ._decompile import DecompileError, decompile

Unsupported = _C.Unsupported
backend = _backends.dynamo_backend

__all__ = ["compile", "reset", "stats", "explain", "list_backends", "register_backend", "list_mode_options",
           "list_options", "disable", "Unsupported", "backend", "CompiledModule", "report", "decompile", "DecompileError"]

_MODES = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"autotune": True},
}
_notes: list[str] = []


def _skip_rules() -> list[tuple[str, bool]]:
    """Ordered (path prefix, skip) rules for which frames kiln offers to capture; first match wins.
    Built-in nn.Module code is captured (its forward is user-like code), and so are torch.optim's
    optimizers (a step inside a compiled function becomes a graph of its own, as with Dynamo); the
    rest of torch, kiln itself, test runners and the standard library are not; third-party packages are."""
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    modules_dir = os.path.join(torch_dir, "nn", "modules") + os.sep
    rules = [(os.path.join(modules_dir, "module.py"), True), (modules_dir, False),
             (os.path.join(torch_dir, "optim") + os.sep, False), (torch_dir, True),
             (os.path.dirname(os.path.abspath(__file__)) + os.sep, True)]
    for mod in ("_pytest", "pluggy", "typing_extensions", "numpy"):
        m = sys.modules.get(mod)
        f = getattr(m, "__file__", None) if m is not None else None
        if f:  # a package directory, or a single-file module itself
            rules.append((os.path.dirname(f) + os.sep if os.path.basename(f) == "__init__.py" else f, True))
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key):
            rules.append((paths[key] + os.sep, False))
    for key in ("stdlib", "platstdlib"):
        if paths.get(key):
            rules.append((paths[key] + os.sep, True))
            rules.append((os.path.realpath(paths[key]) + os.sep, True))
    return rules


_debug_dirs: list[str] = []


def _skip_debug_dir(debug_dir: str) -> None:
    """The dump's graph_module.py files hold the graphs' own code: never offered to kiln as user frames."""
    d = os.path.abspath(debug_dir) + os.sep
    if d not in _debug_dirs:
        _debug_dirs.append(d)
        _C.set_skip_rules([(x, True) for x in _debug_dirs] + _skip_rules())


def _push_options() -> None:
    ch = _options.log_channels()
    mask = 0
    for name, bit in (("graph_breaks", _C.LOG_GRAPH_BREAKS), ("recompiles", _C.LOG_RECOMPILES),
                      ("guards", _C.LOG_GUARDS), ("graph_code", _C.LOG_GRAPH_CODE), ("output_code", _C.LOG_GRAPH_CODE),
                      ("perf", _C.LOG_PERF), ("dynamic", _C.LOG_DYNAMIC)):
        if name in ch:
            mask |= bit
    _C.set_options(mask, _options.get("memoize_shape_propagation"), _options.get("max_inline_depth"))
    _C.set_cuda_compile_settings(_options.get("cuda_unit_bytes"), _options.get("nvrtc_processes"))


def _sym_sum(self, nodes):
    out = nodes[0]
    for n in nodes[1:]:
        out = out.add(n)
    return out


# PyTorch's Python meta functions and decompositions treat every size node like its own Python
# SymNode: they ask for `sym_sum` (torch.cat), and statically_known_true reads `_hint` and `expr`
# (then finds no shape env and answers "not known", which only costs a guard). kiln's symbolic
# sizes are C++ nodes (torch._C._SymNode, see csrc/torch_bridge/sym_node.cpp).
def _sym_free_symbols(self):
    # The size symbols of the expression as sympy Symbols named like kiln's ("s0"): PyTorch's meta
    # functions ask `free_unbacked_symbols` (copy_, in-place ops), which reads their names (kiln
    # has no unbacked symbols). Only reached from PyTorch's Python, which has imported sympy.
    import re
    import sympy
    return {sympy.Symbol(n, integer=True, positive=True) for n in re.findall(r"\bs\d+\b", self._graph_repr())}


for _name, _value in (("sym_sum", _sym_sum), ("_hint", property(lambda self: None)), ("expr", property(lambda self: self)),
                      ("free_symbols", property(_sym_free_symbols))):
    if not hasattr(torch._C._SymNode, _name):
        setattr(torch._C._SymNode, _name, _value)

_C._init()
_C.set_skip_rules(_skip_rules())
_C.set_log_callback(_logging.emit)
_C.set_fx_compiler(_backends.fx_compile)
_C.set_debug_sink(_debug.record_capture)
_options._push_hook = _push_options
_push_options()


def _validate(fullgraph, dynamic, backend, mode, options, disable):
    if not isinstance(fullgraph, bool):
        raise TypeError(f"kiln.compile: fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic not in (None, True, False):
        raise TypeError(f"kiln.compile: dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and mode not in _MODES:
        raise ValueError(f"kiln.compile: unknown mode {mode!r}; available: {', '.join(_MODES)}")
    if not isinstance(disable, bool):
        raise TypeError(f"kiln.compile: disable must be a bool, got {type(disable).__name__}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"kiln.compile: options must be a dict, got {type(options).__name__}")
    opts = {}
    for k, v in (options or {}).items():
        _options.validate(k, v)
        if not _options.registry()[k].per_compile:
            raise ValueError(f"kiln.compile: option {k!r} is process-wide; set it with its environment variable "
                             f"{_options.registry()[k].env or ''} instead")
        opts[k] = v
    return opts


def compile(model=None, *, fullgraph=False, dynamic=None, backend="kiln", mode=None, options=None, disable=False):
    """Compile a function or nn.Module; same arguments and meaning as torch.compile."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    opts = _validate(fullgraph, dynamic, backend, mode, options, disable)
    fn_backend, name = _backends.resolve(backend)
    cudagraphs = mode is not None and _MODES[mode].get("cudagraphs", False)
    autotune = mode is not None and _MODES[mode].get("autotune", False)
    if (cudagraphs or autotune) and backend == "kiln":
        # CUDA graphs: replayed as CUDA graphs on CUDA devices (kiln/_cudagraphs.py); autotune: each
        # generated CUDA kernel's launch configuration timed on the first call (kiln/_codegen.py).
        from . import _codegen
        fn_backend = {(True, False): _codegen.compile_frontend_fx_cudagraphs,
                      (True, True): _codegen.compile_frontend_fx_autotune_cudagraphs,
                      (False, True): _codegen.compile_frontend_fx_autotune}[(cudagraphs, autotune)]
    elif cudagraphs or autotune:
        _note(f"mode={mode!r}: CUDA graphs and autotuning need backend='kiln'; running backend {name!r} as mode='default'")
    if not callable(model):
        raise TypeError(f"kiln.compile expects a callable or nn.Module, got {type(model).__name__}")
    limit = opts.get("recompile_limit", _options.get("recompile_limit"))
    _meta_kernels.avoid_dynamo_import()
    debug_dir = opts.get("debug_dir", _options.get("debug_dir")) or None
    if debug_dir is not None:
        os.makedirs(debug_dir, exist_ok=True)
        _skip_debug_dir(debug_dir)
        if fn_backend is None and name == "eager":  # the captured graph's Python form, so a debugger steps through it
            fn_backend = _backends.python_graph
    compiled = _C.CompiledFunction(model, fn_backend, name, fullgraph, limit, disable, dynamic, debug_dir)
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, compiled)
    functools.update_wrapper(compiled, model, updated=())
    return compiled


def _note(msg: str) -> None:
    if msg not in _notes:
        _notes.append(msg)


def _dims(t, dims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    dims = [dims] if isinstance(dims, int) else list(dims)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise ValueError(f"dimension {d!r} is out of range for a {t.dim()}-d tensor")
    return {d % t.dim() for d in dims}


def mark_dynamic(t, dims):
    """Make these dimensions of `t` symbolic in the next capture that sees it (torch._dynamo.mark_dynamic's
    contract: the same tensor attribute, so either function works with kiln and with torch.compile)."""
    t._dynamo_dynamic_indices = getattr(t, "_dynamo_dynamic_indices", set()) | _dims(t, dims)


def mark_static(t, dims):
    """Keep these dimensions of `t` static (specialised) whatever the dynamic policy."""
    t._dynamo_static_indices = getattr(t, "_dynamo_static_indices", set()) | _dims(t, dims)


def disable(fn):
    """Mark a function so kiln never captures it (calls to it make the caller run eagerly)."""
    fn._kiln_disable = True
    return fn


def reset() -> None:
    """Forget every compiled entry and counter."""
    _C.reset()
    _notes.clear()
    from . import _codegen
    _codegen.clear()


def stats() -> dict:
    s = _C.stats()
    s["notes"] = list(_notes)
    s["kiln_backend"] = _backends.describe("kiln")
    from . import _codegen
    s["codegen"] = [{"status": g.status, "kernels": g.num_kernels, "externs": g.num_externs, "timings": dict(g.timings),
                     "specializations": g.num_specializations, "size_builds": g.num_size_builds, "sizes": g.size_status,
                     "training": g.training_status} for g in _codegen.GRAPHS]
    return s


def report(path: str) -> str:
    """Write the HTML compile report of this process so far (timeline, graphs with breaks, guards,
    recompiles, kernels and a picture of each graph; kiln/_report.py) to `path`; returns the path."""
    from . import _report
    return _report.write(path)


def _report_at_exit() -> None:
    path = _options.get("report")
    if path:
        try:
            report(path)
        except Exception as e:  # noqa: BLE001 - exiting; say why the report is missing
            print(f"kiln: could not write the compile report to {path!r}: {type(e).__name__}: {e}", file=sys.stderr)


atexit.register(_report_at_exit)


def list_mode_options(mode: str | None = None) -> dict:
    return dict(_MODES[mode]) if mode else {k: dict(v) for k, v in _MODES.items()}


def list_options() -> dict:
    return {name: {"type": o.type.__name__, "default": o.default, "env": o.env, "help": o.help, "value": _options.get(name)}
            for name, o in _options.registry().items()}


from ._explain import explain  # noqa: E402
