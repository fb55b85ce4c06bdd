"""Glue for kiln's code generator (backend="kiln" and kiln.backend under Dynamo).

The work happens in C++ (kiln._C.CodegenGraph: tracer, lowering, scheduler, C++ codegen,
compile and run). This file wires options and logs to it, and hands it tensor results only
(sizes a graph returns are read per call beside it: _split_size_outputs).
"""
from __future__ import annotations

import builtins
import functools
import operator

import torch

from . import _C, _debug, _logging, _options

# Compiled graphs of this process, for kiln.stats(), kiln.report() and tests; per graph, the index
# of the frontend's graph record it was compiled from (-1 under PyTorch's Dynamo), and when each
# graph's build finished (kiln._C._now()'s clock; the report's timeline).
GRAPHS: list = []
GRAPH_OWNERS: list = []
FINISHED_AT: dict = {}


def clear() -> None:
    GRAPHS.clear()
    GRAPH_OWNERS.clear()
    FINISHED_AT.clear()


def _report(g, dump_to=None) -> None:
    FINISHED_AT[id(g)] = _C._now()
    if dump_to is not None:
        _debug.record_codegen(dump_to, g)
    channels = _options.log_channels()
    if "aten_graph" in channels:  # the tracer's output
        _logging.emit("aten_graph", g.graph_text)
    if "loop_ir" in channels and g.program_text:  # after lowering, scheduling and memory planning
        _logging.emit("loop_ir", g.program_text)
    if "output_code" in channels:
        _logging.emit("output_code", g.source or g.status)
    if "dynamic" in channels and g.size_status:  # runtime sizes: the kernels' size symbols, or why sizes are specialised
        _logging.emit("dynamic", "codegen: " + g.size_status)
    if "autograd" in channels and g.training_status:  # what the partitioner saved and recomputed
        _logging.emit("autograd", "training graph: " + g.training_status)
    if "perf" in channels:
        t = dict(g.timings)
        _logging.emit("perf", "codegen: " + ", ".join(f"{k}={v:.4f}s" if isinstance(v, float) else f"{k}={v}" for k, v in t.items())
                      + f"; {g.num_kernels} kernels, {g.num_externs} extern calls; {g.status}")


def compile_fx(gm, example_inputs, frontend=False, extern_only=False, autotune=False):
    """fx.GraphModule -> callable running kiln's generated code (traced and compiled on first call).

    Under kiln's own frontend (frontend=True) a call the generated code cannot take with its inputs
    untouched raises kiln._C.GraphDeclined instead of running the graph eagerly itself: the frontend
    then runs the whole frame eagerly, so side effects it replays after the graph keep their order
    with an exception the graph raises.

    autotune (mode="max-autotune"): each generated CUDA kernel is built in several launch
    configurations, timed on the first call's inputs, and the fastest kept; the choice is cached
    beside the cubins, so a warm process does not time again (g.autotune_status says what was chosen)."""
    if _options.get("cpu_malloc_tuning"):
        _C.tune_cpu_malloc()
    split = _split_size_outputs(gm, example_inputs)
    if split is not None:
        tensor_gm, sizes_gm, positions, extra = split
        ret = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        graph = compile_fx(tensor_gm, example_inputs, frontend=frontend, extern_only=extern_only, autotune=autotune)
        return _WithSizes(graph, sizes_gm.forward, frozenset(positions), len(ret), isinstance(ret, list), extra)
    folder = _debug.current_entry()
    report = _report if folder is None else functools.partial(_report, dump_to=folder)
    g = _C.CodegenGraph(gm.forward, _options.get("cache_dir"), report, _options.get("fusion"),
                        _options.get("compile_background"), _options.get("compile_jobs"), frontend,
                        _options.get("size_specializations"), _options.get("partitioner") == "min_cut", extern_only,
                        _enables_grad(gm), folder is not None, autotune, _options.get("runtime_sizes"))
    GRAPHS.append(g)
    GRAPH_OWNERS.append(_C._graph_record_count() if frontend else -1)
    return g


_INT_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg, builtins.max, builtins.min,
            builtins.abs}


def _split_size_outputs(gm, example_inputs):
    """A graph handing back sizes (the frontend stores `cache.n = x.shape[1]` after the graph, a
    SymInt under dynamic shapes; a loop counter goes on to the next resume function) as (tensor
    module, sizes module, positions of the sizes, how many tensors the tensor module adds), or
    None. The code generator compiles tensor results only: the tensor module returns the graph's
    tensors, then each tensor the graph computes whose size is read (a cache's new keys); the
    sizes module (size reads and integer operators alone, nothing that writes) takes the graph's
    inputs and those tensors and computes the sizes per call, where the whole graph used to run
    eagerly."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    ret = out.args[0]
    if not isinstance(ret, (tuple, list)):
        return None
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    int_inputs = {p for p, e in zip(inputs, example_inputs) if isinstance(e, (int, torch.SymInt)) and not isinstance(e, bool)}
    kinds: dict = {}

    def tensor(a):  # a node the size methods read: any but an int input
        return isinstance(a, torch.fx.Node) and a not in int_inputs and a.op in ("placeholder", "call_function", "call_method", "call_module")

    def kind(a):  # "int", "size" (a whole torch.Size) or None
        if isinstance(a, bool) or not isinstance(a, (int, torch.fx.Node)):
            return None
        if isinstance(a, int):
            return "int"
        if a not in kinds:
            k = None
            if a in int_inputs:
                k = "int"
            elif a.op == "call_method" and a.target == "size" and not a.kwargs and tensor(a.args[0]):
                k = "int" if len(a.args) == 2 and isinstance(a.args[1], int) else "size" if len(a.args) == 1 else None
            elif a.op == "call_method" and a.target in ("dim", "numel") and len(a.args) == 1 and not a.kwargs and tensor(a.args[0]):
                k = "int"
            elif a.op == "call_function" and a.target is operator.getitem and kind(a.args[0]) == "size" and isinstance(a.args[1], int):
                k = "int"
            elif a.op == "call_function" and a.target in _INT_OPS and not a.kwargs and all(kind(x) == "int" for x in a.args):
                k = "int"
            kinds[a] = k
        return kinds[a]

    sizes = [i for i, a in enumerate(ret) if isinstance(a, torch.fx.Node) and kind(a) == "int"]
    if not sizes or len(sizes) == len(ret):
        return None
    needed: list = []  # the size computations, in graph order once sorted
    read: list = []    # tensors the graph computes whose sizes they read

    def need(a):
        if not isinstance(a, torch.fx.Node) or a in needed or a in read or a in inputs:
            return
        if kind(a) is None:  # a tensor whose size is read (kind() vouched for it)
            read.append(a)
            return
        needed.append(a)
        for x in a.args:
            need(x)
    for i in sizes:
        need(ret[i])
    order = {n: k for k, n in enumerate(gm.graph.nodes)}
    size_graph = torch.fx.Graph()
    env: dict = {}
    for n in inputs:
        env[n] = size_graph.node_copy(n, lambda x: env[x])
    for k, t in enumerate(read):
        env[t] = size_graph.placeholder(f"read_{k}")
    for n in sorted(needed, key=order.__getitem__):
        env[n] = size_graph.node_copy(n, lambda x: env[x])
    size_graph.output(tuple(env[ret[i]] for i in sizes))
    tensor_graph = torch.fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op != "output":
            env[n] = tensor_graph.node_copy(n, lambda x: env[x])
    kept = [env[a] if isinstance(a, torch.fx.Node) else a for i, a in enumerate(ret) if i not in sizes]
    tensor_graph.output(tuple(kept + [env[t] for t in read]))
    return torch.fx.GraphModule(gm, tensor_graph), torch.fx.GraphModule(gm, size_graph), sizes, len(read)


class _WithSizes:
    """A compiled graph's tensor results and its sizes module's, in the graph's order."""

    def __init__(self, graph, sizes_fn, positions, n, as_list, extra):
        self.graph, self._sizes_fn, self._positions, self._n, self._as_list = graph, sizes_fn, positions, n, as_list
        self._extra = extra  # tensors the graph adds for the sizes module, after its own

    def __call__(self, *args):
        results = self.graph(*args)
        read = results[len(results) - self._extra:] if self._extra else ()
        sizes, tensors = iter(self._sizes_fn(*args, *read)), iter(results)  # the extra tensors come last, unread here
        at = self._positions
        out = [next(sizes) if i in at else next(tensors) for i in range(self._n)]
        return out if self._as_list else tuple(out)

    capturable = False  # a CUDA graph replay (kiln/_cudagraphs.py) hands back tensors only

    def __getattr__(self, name):  # status, source, timings...: the compiled graph's
        return getattr(self.graph, name)


def _enables_grad(gm) -> bool:
    return any(n.op == "call_function" and n.target is torch._C._set_grad_enabled and n.args and n.args[0] is True
               for n in gm.graph.nodes)


def compile_frontend_fx_cudagraphs(gm, example_inputs, autotune=False):
    """mode="reduce-overhead": the graph replayed as a CUDA graph where it can be (kiln/_cudagraphs.py)."""
    from ._cudagraphs import CudaGraphRunner
    return CudaGraphRunner(compile_fx(gm, example_inputs, frontend=True, autotune=autotune))


def compile_frontend_fx_autotune_cudagraphs(gm, example_inputs):
    """mode="max-autotune": autotuned CUDA kernels, replayed as CUDA graphs."""
    return compile_frontend_fx_cudagraphs(gm, example_inputs, autotune=True)


def compile_frontend_fx(gm, example_inputs):
    return compile_fx(gm, example_inputs, frontend=True)


def compile_frontend_fx_autotune(gm, example_inputs):
    """mode="max-autotune-no-cudagraphs": autotuned CUDA kernels."""
    return compile_fx(gm, example_inputs, frontend=True, autotune=True)


def compile_aot_eager_fx(gm, example_inputs):
    return compile_fx(gm, example_inputs, frontend=True, extern_only=True)
