"""Objects a compiled frame's prologue makes before every run of its graph (the C++ Source::kMade).

An ``nn.Parameter`` built inside captured code is such an object: the graph takes it as an input
and writes its data into it (see csrc/frontend/objects/new_parameter.cpp).
"""
import torch


def new_parameter(cls, shape, dtype, device, requires_grad):
    return cls(torch.empty(shape, dtype=dtype, device=device), requires_grad)
