"""Export of kiln's captured graph to a real torch.fx.GraphModule, for custom backends.

The C++ core describes the graph as (op, name, target, args, kwargs) rows whose arguments are
encoded ('n', node_index) | ('c', constant) | ('t'|'l', [items]); this rebuilds it with fx's
public Graph API, so a backend receives exactly what torch.compile would hand it.
"""
import torch
import torch.fx as fx


def to_graph_module(rows, name="kiln_graph"):
    g = fx.Graph()
    nodes = []

    def dec(a):
        tag, v = a
        if tag == "n":
            return nodes[v]
        if tag == "c":
            return v
        items = [dec(x) for x in v]
        return tuple(items) if tag == "t" else items

    for op, nm, target, args, kwargs in rows:
        if op == "placeholder":
            n = g.placeholder(nm)
        elif op == "call_function":
            n = g.call_function(target, tuple(dec(a) for a in args), {k: dec(v) for k, v in kwargs.items()})
        elif op == "call_method":
            n = g.call_method(target, tuple(dec(a) for a in args), {k: dec(v) for k, v in kwargs.items()})
        elif op == "output":
            n = g.output(dec(args[0]))
        else:
            raise ValueError(f"unknown graph op {op}")
        nodes.append(n)
    gm = fx.GraphModule(torch.nn.Module(), g, class_name=name)
    return gm
