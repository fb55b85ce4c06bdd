"""mode="reduce-overhead": a compiled CUDA graph's kernels and ATen calls recorded once as a CUDA
graph and replayed, so a call costs one launch instead of one per kernel (what launch-bound
models, small batches and decoding, need).

Glue around kiln._C.CodegenGraph: the graph must be compiled for CUDA, take only CUDA tensors and
write none of its inputs (capturable); calls that do not qualify run it as usual. Per input
signature (shapes, strides, dtypes, and the addresses of parameters, which stay put) one capture,
at most `_MAX_CAPTURES` of them. Inputs that are not parameters are copied into the capture's
own tensors before each replay; outputs, which live in the capture's memory pool and would be
overwritten by the next replay, are handed back as copies. Kernels that divide integers by a
tensor keep their error flag in device memory during replay; it is read after it (a host sync),
and a set flag reruns the call normally, which gives eager's result. (Out-of-range indices are
device-side assertions, as in eager: no flag, no sync.)

A graph of fewer than `_MIN_LAUNCHES` launches is not captured: one replay plus the copy of its
inputs and outputs costs more than launching its kernels directly (a single fused kernel: 27 us
a call against 9 us on an H100), so it runs as compiled.
"""
from __future__ import annotations

import torch

from kiln import _C

_MAX_CAPTURES = 8
_MIN_LAUNCHES = 3  # kernels and extern calls of a graph worth a CUDA graph
RUNNERS: list = []  # of this process, for tests and kiln.stats


def _signature(args):
    key = []
    for a in args:
        key.append((tuple(a.shape), a.stride(), a.dtype, a.device.index, a.data_ptr() if isinstance(a, torch.nn.Parameter) else 0))
    return tuple(key)


def _clone_outputs(out):
    if isinstance(out, torch.Tensor):
        return out.clone()
    return type(out)(o.clone() for o in out)


class _Capture:
    def __init__(self, graph, args):
        self.static = [a if isinstance(a, torch.nn.Parameter) else torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                       for a in args]
        self.copied = [i for i, a in enumerate(args) if not isinstance(a, torch.nn.Parameter)]
        # The check of a later call (`matches`): parameters by address, copied inputs by layout, in C++.
        self.check = _C.CaptureCheck(args, torch.nn.Parameter)
        for i in self.copied:
            self.static[i].copy_(args[i])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # allocations settle outside the capture
            graph.run_for_capture(*self.static)
        torch.cuda.current_stream().wait_stream(side)
        self.cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.cuda_graph):
            self.out, self.flag = graph.run_for_capture(*self.static)

    def matches(self, args):
        """Whether this capture serves these arguments: what _signature would say, checked in one
        C++ call without walking every parameter in Python (a model has hundreds)."""
        return self.check(args)

    def replay(self, args):
        for i in self.copied:
            self.static[i].copy_(args[i])
        self.cuda_graph.replay()
        if self.flag is not None and int(self.flag.item()):
            self.flag.zero_()
            return None
        return _clone_outputs(self.out)


class CudaGraphRunner:
    """Wraps a CodegenGraph; see the module docstring."""

    def __init__(self, graph):
        RUNNERS.append(self)
        self.graph = graph
        self.captures: dict = {}
        self.disabled = ""  # why this graph is not replayed (kept for kiln.stats and tests)
        self.replays = 0
        self.last = None  # the capture the last call replayed: tried first

    def __getattr__(self, name):  # status, source, timings...: the wrapped graph's
        return getattr(self.graph, name)

    def __call__(self, *args):
        g = self.graph
        last = self.last
        if last is not None and not self.disabled and not torch.is_grad_enabled() and last.matches(args):
            out = last.replay(args)  # the common case: the same parameters, inputs of the same layout
            if out is None:
                return g(*args)
            self.replays += 1
            return out
        if self.disabled or not g.capturable or not all(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            return g(*args)
        launches = g.num_kernels + g.num_externs
        if launches < _MIN_LAUNCHES:
            self.disabled = f"{launches} launch(es): a CUDA graph replay with its input and output copies costs more; runs as compiled"
            return g(*args)
        if torch.is_grad_enabled() and any(a.requires_grad for a in args):
            return g(*args)  # training: the autograd pair runs as compiled
        key = _signature(args)
        cap = self.captures.get(key)
        if cap is None:
            if len(self.captures) >= _MAX_CAPTURES:
                return g(*args)
            try:
                cap = _Capture(g, args)
            except Exception as e:  # an ATen call that syncs or allocates on the host, ...
                self.disabled = f"CUDA graph capture failed: {type(e).__name__}: {e}"
                return g(*args)
            self.captures[key] = cap
        self.last = cap
        out = cap.replay(args)
        if out is None:  # a kernel's check failed: the normal path raises eager's exception
            return g(*args)
        self.replays += 1
        return out
