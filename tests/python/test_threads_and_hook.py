"""The PEP 523 hook: installed only while compiled code runs, chains with PyTorch's Dynamo,
never re-enters itself, and is safe when two threads call the same compiled function."""
import sys
import threading

import torch

import kiln
from conftest import assert_same


def test_hook_installed_only_during_calls():
    seen = []

    def f(x):
        return x + 1
    c = kiln.compile(f)
    assert not kiln._C.hook_installed()
    c(torch.randn(2))
    assert not kiln._C.hook_installed()

    def probe(x):  # calls into kiln._C, which kiln cannot capture: runs eagerly under the hook
        seen.append(kiln._C.hook_installed())
        return x
    kiln.compile(probe)(torch.randn(2))
    assert seen == [True]
    assert not kiln._C.hook_installed()


def test_two_threads_same_function():
    def f(x, k):
        y = x
        for _ in range(20):
            y = torch.sin(y) * k + 0.1
        return y
    c = kiln.compile(f)
    errors = []

    def worker(seed, shape):
        try:
            g = torch.Generator().manual_seed(seed)
            for i in range(30):
                x = torch.randn(*shape, generator=g)
                assert_same(c(x, 2), f(x, 2))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(s, shape)) for s, shape in ((1, (4, 4)), (2, (3, 5)), (3, (4, 4)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    s = kiln.stats()
    assert s["frames_compiled"] == 2 and s["graph_breaks"] == 0


def test_nested_compiled_functions():
    inner = kiln.compile(lambda x: x * 2)

    def outer(x):
        return inner(x) + 1
    c = kiln.compile(outer)
    x = torch.randn(3)
    assert_same(c(x), x * 2 + 1)
    assert kiln.stats()["graphs"] == 1


def test_chains_with_torch_dynamo():
    import torch._dynamo
    torch._dynamo.reset()
    dyn = torch.compile(lambda x: x.cos() + 1, backend="eager")
    k = kiln.compile(lambda x: dyn(x) * 2)
    x = torch.randn(4)
    assert_same(k(x), (x.cos() + 1) * 2)
    # and the other way round
    kk = kiln.compile(lambda x: x.sin())
    dyn2 = torch.compile(lambda x: kk(x) - 1, backend="eager")
    assert_same(dyn2(x), x.sin() - 1)
    torch._dynamo.reset()


def test_recursion_and_exceptions_leave_hook_clean():
    def f(x):
        raise KeyError("k")
    c = kiln.compile(f)
    for _ in range(3):
        try:
            c(torch.randn(2))
        except KeyError:
            pass
    assert not kiln._C.hook_installed()


def test_library_frames_are_skipped():
    # a frame from the standard library is never captured even when it receives tensors
    import copy
    c = kiln.compile(lambda x: copy.copy(x) + 1)
    c(torch.randn(2))
    assert all("copy.py" not in g["function"] for g in kiln.stats()["graph_records"])


class _Config:
    scale = 2.0


def _helper_obj_first(cfg, x):
    return x * cfg.scale


def test_nested_frame_with_non_tensor_first_arg_does_not_recurse():
    # Deciding whether to capture a frame may run Python (Tensor's __instancecheck__ on a
    # non-tensor argument); that must not re-enter the hook (it once recursed until a
    # RecursionError escaped as a C++ exception and aborted the process).
    def caller(x):
        print("", end="")  # this frame runs eagerly; its callee is offered to kiln
        return _helper_obj_first(_Config(), x)
    x = torch.randn(3)
    assert_same(kiln.compile(caller)(x), x * 2.0)


def test_third_party_site_packages_frames_are_offered():
    # Files under site-packages (e.g. transformers) must not be skipped as standard library.
    rules = kiln._skip_rules()
    import sysconfig
    site = sysconfig.get_paths()["purelib"]
    probe = site + "/some_pkg/model.py"
    decision = next(skip for prefix, skip in rules if probe.startswith(prefix))
    assert decision is False
    torch_file = torch.__file__
    assert next(skip for prefix, skip in rules if torch_file.startswith(prefix)) is True


def test_clean_interpreter_exit_after_compiling(tmp_path):
    # kiln keeps Python references in process-lifetime caches; none may be released after the
    # interpreter is finalised (that crashed at exit on 3.12 once).
    import os
    import subprocess
    script = tmp_path / "exit_check.py"
    script.write_text(
        "import torch, kiln\n"
        "m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "c = kiln.compile(m)\n"
        "c(torch.randn(2, 4)); c(torch.randn(2, 4))\n"
        "class K:\n"
        "    def f(self, x):\n"
        "        return super().__init__(), x\n"
        "kiln.compile(lambda x: K().f(x)[1] * 2)(torch.randn(2))\n"
        "print('done')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__))))  # the kiln under test
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "done" in r.stdout
