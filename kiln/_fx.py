"""Export of kiln's captured graph to a real torch.fx.GraphModule, for custom backends.

The C++ core describes the graph as (op, name, target, args, kwargs) rows whose arguments are
encoded ('n', node_index) | ('c', constant) | ('t'|'l', [items]); this rebuilds it with fx's
public Graph API, so a backend receives exactly what torch.compile would hand it.
"""
import math
import operator

import torch
import torch.fx as fx


# Constants fx writes into the generated code as themselves; any other object (a torch.Generator
# the function was given) becomes an attribute of the module, read by a get_attr node: its repr
# (`<torch._C.Generator object at 0x...>`) is no Python, and compiling the module failed.
_LITERAL = (type(None), bool, int, float, complex, str, type(Ellipsis), torch.dtype, torch.device, torch.layout,
            torch.memory_format)


def _literal(v):
    if isinstance(v, (tuple, list, torch.Size)):
        return all(_literal(x) for x in v)
    if isinstance(v, slice):
        return _literal((v.start, v.stop, v.step))
    return isinstance(v, _LITERAL) or callable(v) or isinstance(v, type)


def _negative_number(v):
    return type(v) in (int, float) and math.copysign(1.0, v) < 0


def to_graph_module(rows, name="kiln_graph"):
    g = fx.Graph()
    nodes = []
    root = torch.nn.Module()
    attrs = {}  # id(object) -> its get_attr node

    def dec(a):
        tag, v = a
        if tag == "n":
            return nodes[v]
        if tag == "c":
            if _literal(v):
                return v
            if id(v) not in attrs:
                attr = f"_kiln_const_{len(attrs)}"
                setattr(root, attr, v)
                attrs[id(v)] = g.get_attr(attr)
            return attrs[id(v)]
        items = [dec(x) for x in v]
        return tuple(items) if tag == "t" else items

    for op, nm, target, args, kwargs in rows:
        if op == "placeholder":
            n = g.placeholder(nm)
        elif op == "call_function":
            fargs = tuple(dec(a) for a in args)
            if target is operator.pow and fargs and _negative_number(fargs[0]):
                # fx prints `pow_1 = -2.0 ** x`, which Python reads as -(2.0 ** x): the base
                # becomes a node of its own, printed on its own line.
                fargs = (g.call_function(operator.neg, (-fargs[0],)),) + fargs[1:]
            n = g.call_function(target, fargs, {k: dec(v) for k, v in kwargs.items()})
        elif op == "call_method":
            n = g.call_method(target, tuple(dec(a) for a in args), {k: dec(v) for k, v in kwargs.items()})
        elif op == "output":
            n = g.output(dec(args[0]))
        else:
            raise ValueError(f"unknown graph op {op}")
        nodes.append(n)
    gm = fx.GraphModule(root, g, class_name=name)
    return gm
