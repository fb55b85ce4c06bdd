"""kiln's bytecode assembler re-creates every code object of a broad sample of the standard
library and PyTorch byte for byte (co_code and co_exceptiontable) from its decoded form: the
ground the resume functions of graph breaks are built on."""
import importlib
import types

import pytest

from kiln import _C

MODULES = ["json.decoder", "json.encoder", "argparse", "collections", "dataclasses", "typing", "functools",
           "inspect", "ast", "re._parser", "re._compiler", "logging", "pathlib", "tokenize", "unittest.case",
           "asyncio.base_events", "email.message", "decimal", "fractions", "difflib", "torch.nn.modules.module",
           "torch.nn.functional", "torch.nn.modules.transformer", "torch.nn.modules.conv", "torch._tensor",
           "torch.optim.adam", "torch.fx.graph", "torch.utils.data.dataloader"]


def code_objects(mod):
    stack, seen = [], set()
    for obj in vars(mod).values():
        if isinstance(obj, types.FunctionType):
            stack.append(obj.__code__)
        elif isinstance(obj, type):
            for v in vars(obj).values():
                f = getattr(v, "__func__", v)
                f = getattr(f, "fget", f)
                if isinstance(f, types.FunctionType):
                    stack.append(f.__code__)
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


@pytest.mark.parametrize("name", MODULES)
def test_code_objects_round_trip_byte_for_byte(name):
    mod = importlib.import_module(name)
    n = 0
    for code in code_objects(mod):
        again, table = _C._assemble_roundtrip(code.co_code, code.co_exceptiontable)
        assert again == code.co_code, f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
        assert table == code.co_exceptiontable, f"{code.co_qualname} exception table"
        n += 1
    assert n > 5, f"only {n} code objects found in {name}"
