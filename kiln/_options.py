"""The one typed options registry: every knob and environment variable kiln reads lives here.

Each option has a type, a default, an optional environment variable and a help string.
`kiln.compile(..., options={...})` validates against this registry; `kiln.list_options()`
lists it. The C++ core never reads the environment: values are pushed to it from here.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: Any
    help: str
    env: str | None = None
    choices: tuple | None = None
    per_compile: bool = False  # may be given in kiln.compile(options=...)


LOG_CHANNELS = ("graph_breaks", "recompiles", "guards", "graph_code", "aten_graph", "loop_ir", "output_code", "perf", "dynamic",
                "autograd")

_REGISTRY: dict[str, Option] = {}


def _opt(*args, **kw):
    o = Option(*args, **kw)
    _REGISTRY[o.name] = o


_opt("recompile_limit", int, 8, "cache entries per code object and compiled callable before running eagerly", per_compile=True)
_opt("debug_dir", str, "", "write a debug dump of every capture there: the frame's code, the captured and ATen graphs, loop IR, "
     "kernels, guards, break and recompile reasons, index.md and manifest.json (see kiln/_debug.py)", env="KILN_DEBUG_DIR",
     per_compile=True)
_opt("report", str, "", "write the HTML compile report (kiln.report) to this path when the process exits", env="KILN_REPORT")
_opt("logs", str, "", "comma list of log channels: " + ",".join(LOG_CHANNELS), env="KILN_LOGS")
_opt("memoize_shape_propagation", bool, True, "reuse meta-tensor results for repeated operator signatures", env="KILN_MEMOIZE_META")
_opt("cache_dir", str, "", "where compiled kernels are cached (default: $XDG_CACHE_HOME/kiln or ~/.cache/kiln)", env="KILN_CACHE_DIR")
_opt("compile_background", bool, False, "build each graph on a background thread; its calls run eagerly until the build is done", env="KILN_COMPILE_BACKGROUND")
_opt("compile_jobs", int, 0, "C++ compiler processes at once, also the most translation units per graph (0: one per CPU)", env="KILN_COMPILE_JOBS")
_opt("cuda_unit_bytes", int, 16000, "CUDA graphs: about this much kernel source per NVRTC unit; units compile concurrently "
     "(at most compile_jobs of them)", env="KILN_CUDA_UNIT_BYTES")
_opt("nvrtc_processes", bool, False, "CUDA graphs: compile NVRTC units in child processes instead of threads",
     env="KILN_NVRTC_PROCESSES")
_opt("fusion", bool, True, "fuse elementwise work into consumers and reductions (off: every computed value gets its own buffer and kernel)", env="KILN_FUSION")
_opt("size_specializations", int, 8, "per graph with symbolic sizes: how many size signatures get kernels generated "
     "for them where kernels cannot take the sizes at run time (CUDA graphs: four times this many); calls of other "
     "sizes run the graph op by op",
     env="KILN_SIZE_SPECIALIZATIONS")
_opt("cpu_malloc_tuning", bool, True, "when the first CPU graph is compiled, set glibc's mmap and trim thresholds to the values its own "
     "adjustment stops at (32 MB, 64 MB): without, a process may hand freed heap pages back to the OS and fault them in again "
     "on every call (see csrc/runtime/malloc_tuning.h)", env="KILN_CPU_MALLOC_TUNING")
_opt("runtime_sizes", bool, True, "CPU inference graphs called at several sizes: one kernel set that takes the sizes at run "
     "time, fitted once three sizes are seen (off: one specialisation per size signature)", env="KILN_RUNTIME_SIZES")
_opt("partitioner", str, "min_cut", "what a training graph's forward saves for its backward: 'min_cut' (the fewest bytes, "
     "cheap ops recomputed in the backward) or 'save_all' (every forward value the backward reads)",
     env="KILN_PARTITIONER", choices=("min_cut", "save_all"))
_opt("ddp_split", bool, True, "inside DistributedDataParallel, split each graph where DDP's gradient buckets split, so "
     "all-reduce overlaps the backward", env="KILN_DDP_SPLIT")
_opt("max_inline_depth", int, 48, "deepest chain of inlined calls before the frame runs eagerly", env="KILN_MAX_INLINE_DEPTH")

_values: dict[str, Any] = {}


def _parse(opt: Option, raw: str) -> Any:
    if opt.type is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{opt.env}={raw!r}: expected a boolean (1/0/true/false)")
    try:
        return opt.type(raw)
    except ValueError as e:
        raise ValueError(f"{opt.env}={raw!r}: expected {opt.type.__name__}") from e


def validate(name: str, value: Any) -> Any:
    if name not in _REGISTRY:
        raise ValueError(f"kiln: unknown option {name!r}; known options: {', '.join(sorted(_REGISTRY))}")
    opt = _REGISTRY[name]
    if opt.type is int and isinstance(value, bool) or not isinstance(value, opt.type):
        raise TypeError(f"kiln: option {name!r} expects {opt.type.__name__}, got {type(value).__name__} ({value!r})")
    if opt.type is int and value < 0:
        raise ValueError(f"kiln: option {name!r} must be >= 0, got {value}")
    if opt.choices and value not in opt.choices:
        raise ValueError(f"kiln: option {name!r} must be one of {', '.join(opt.choices)}, got {value!r}")
    if name == "logs":
        bad = [c for c in value.split(",") if c.strip() and c.strip() not in LOG_CHANNELS]
        if bad:
            raise ValueError(f"kiln: unknown log channel(s) {bad}; known: {', '.join(LOG_CHANNELS)}")
    return value


def get(name: str) -> Any:
    if name in _values:
        return _values[name]
    opt = _REGISTRY[name]
    if opt.env and opt.env in os.environ:
        return validate(name, _parse(opt, os.environ[opt.env]))
    return opt.default


def set(name: str, value: Any) -> None:
    _values[name] = validate(name, value)
    _push()


def unset(name: str) -> None:
    """Back to the environment variable or the default."""
    _values.pop(name, None)
    _push()


def registry() -> dict[str, Option]:
    return dict(_REGISTRY)


def log_channels() -> set[str]:
    return {c.strip() for c in get("logs").split(",") if c.strip()}


_push_hook: Callable[[], None] | None = None


def _push() -> None:
    if _push_hook:
        _push_hook()
