"""Glue for compiling a model inside DistributedDataParallel: the captured graph is split where
DDP's gradient buckets split (the assignment is csrc/autograd/ddp_buckets.cpp), each piece is
compiled by the backend on its own, so each piece's backward is its own autograd node and a
bucket's all-reduce starts while the backward of the pieces before it still runs."""
from __future__ import annotations

import torch
from torch.fx.passes.split_module import split_module

from . import _C, _options


def active_bucket_cap() -> int | None:
    """The bucket size of the DDP module whose forward is running, or None."""
    if not _options.get("ddp_split") or not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel
    ddp = DistributedDataParallel._get_active_ddp_module()
    return int(ddp.bucket_bytes_cap) if ddp is not None else None


class _Piece(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def compile_by_buckets(gm: torch.fx.GraphModule, example_inputs, backend, bucket_cap: int):
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {}  # placeholder -> parameter index
    sizes = []
    for node, ex in zip(placeholders, example_inputs):
        if isinstance(ex, torch.nn.Parameter) and ex.requires_grad:
            params[node] = len(sizes)
            sizes.append(ex.numel() * ex.element_size())
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    reads = [[params[a] for a in n.all_input_nodes if a in params] for n in body]
    pieces = _C._ddp_bucket_pieces(reads, sizes, bucket_cap)
    if not pieces or max(pieces) == 0:
        return backend(gm, example_inputs)
    piece_of = dict(zip(body, pieces))
    split = split_module(gm, None, lambda n: piece_of[n], keep_original_order=True)
    # Each piece's example inputs: what it receives when the split graph runs on the example.
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            seen[target] = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            return super().call_module(target, args, kwargs)

    with torch.no_grad():
        Recorder(split).run(*example_inputs)
    for name in sorted(seen):
        setattr(split, name, _Piece(backend(getattr(split, name), seen[name])))
    split.kiln_pieces = len(seen)
    return split
