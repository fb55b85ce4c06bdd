"""Test inputs for the decompiler corpus's behaviour check (tools/decompiler_corpus.py --behaviour).

WORKLOADS maps a corpus module (import name) to a function that drives the module's public API on
fixed inputs and returns a deterministic value (text, numbers, tuples; no object ids, times or
temporary paths). The corpus tool runs each workload with the module's functions as compiled
from their own source, then with every function's code replaced by the recompiled decompiled
source, and compares the two results; a function counts as behaviour-checked when its replaced
code ran. Runs under 3.11 and 3.12 with the standard library only; the torch workloads are
skipped where torch is not installed (the 3.12 interpreter)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decompiler_workloads_runtime import (w_asyncio, w_collections, w_contextlib, w_copy_operator_weakref,  # noqa: E402
                                          w_dataclasses, w_enum, w_functools, w_inspect, w_pathlib,
                                          w_shutil_glob_tempfile, w_traceback, w_typing)
from decompiler_workloads_text import (w_argparse, w_ast, w_bisect, w_colorsys, w_configparser, w_csv,  # noqa: E402
                                       w_difflib, w_fnmatch, w_fractions, w_heapq, w_ipaddress, w_json, w_posixpath,
                                       w_random, w_shlex, w_statistics, w_string, w_textwrap,
                                       w_tokenize_pprint_calendar_gettext)

_PATHS = ["/a/./b/../c//d", "", "../..", "a/b/", "/", "//x", "///x/..", ".", "a/../..", b"/x/../y", b""]
DIRECT = {("posixpath", "normpath"): [(p,) for p in _PATHS] + [(None,)],
          ("operator", "truth"): [(0,), (1,), ([],), ("a",), (None,)],
          ("heapq", "heappush"): [([1, 3, 5], 2), ([], 0)], ("heapq", "heappop"): [([1, 3, 5],), ([],)],
          ("heapq", "heapify"): [([5, 1, 4, 2],)], ("heapq", "heapreplace"): [([1, 3, 5], 4), ([], 1)],
          ("heapq", "heappushpop"): [([1, 3, 5], 4), ([2], 1)], ("bisect", "bisect_left"): [([1, 2, 2, 4], 2), ([1, 2], 3, 0, 1)],
          ("bisect", "bisect_right"): [([1, 2, 2, 4], 2), ([1, 2], 0, 1)], ("bisect", "insort_left"): [([1, 3], 2)],
          ("bisect", "insort_right"): [([1, 3], 3)]}


def _has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


# Corpus module (import name) -> workload. Several modules share one workload where one program
# drives them together.
WORKLOADS = {"textwrap": w_textwrap, "json.encoder": w_json, "json.decoder": w_json, "string": w_string, "shlex": w_shlex,
             "heapq": w_heapq, "bisect": w_bisect, "fnmatch": w_fnmatch, "posixpath": w_posixpath, "colorsys": w_colorsys,
             "statistics": w_statistics, "difflib": w_difflib, "argparse": w_argparse, "ast": w_ast, "inspect": w_inspect,
             "dataclasses": w_dataclasses, "functools": w_functools, "collections": w_collections, "enum": w_enum,
             "contextlib": w_contextlib, "tokenize": w_tokenize_pprint_calendar_gettext, "pathlib": w_pathlib,
             "configparser": w_configparser, "pprint": w_tokenize_pprint_calendar_gettext, "csv": w_csv,
             "calendar": w_tokenize_pprint_calendar_gettext, "asyncio.tasks": w_asyncio, "asyncio.locks": w_asyncio,
             "asyncio.queues": w_asyncio, "typing": w_typing, "copy": w_copy_operator_weakref, "gettext": w_tokenize_pprint_calendar_gettext,
             "ipaddress": w_ipaddress, "fractions": w_fractions, "random": w_random, "traceback": w_traceback,
             "shutil": w_shutil_glob_tempfile, "tempfile": w_shutil_glob_tempfile, "glob": w_shutil_glob_tempfile,
             "operator": w_copy_operator_weakref, "weakref": w_copy_operator_weakref}
if _has_torch():
    from decompiler_workloads_torch import w_torch_nn, w_torch_optim
    for _m in ("nn.functional", "nn.modules.module", "nn.modules.linear", "nn.modules.conv", "nn.modules.activation",
               "nn.modules.normalization", "nn.modules.container", "nn.modules.pooling", "nn.modules.dropout", "nn.modules.loss",
               "nn.modules.rnn", "nn.modules.transformer", "nn.modules.batchnorm", "nn.init"):
        WORKLOADS["torch." + _m] = w_torch_nn
    for _m in ("optim.optimizer", "optim.adam", "optim.adamw", "optim.sgd", "optim.rmsprop", "optim.lr_scheduler", "optim.adagrad",
               "optim.swa_utils", "nn.utils.clip_grad"):
        WORKLOADS["torch." + _m] = w_torch_optim
