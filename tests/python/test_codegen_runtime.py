"""The code generator's runtime: the on-disk cache (hits, a new process, corrupted files), a
missing compiler, background builds, graphs split into several translation units, and the
output_code / perf logs."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import _C

# Where the kiln under test lives (the checkout, or scripts/sanitize.sh's instrumented copy):
# child processes import that same build, whose compile flags are part of the kernel cache key.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))


def fn(x, w):
    return F.layer_norm(F.gelu(x * w) + x, (x.shape[-1],))


def inputs():
    return torch.randn(8, 32), torch.randn(32)


def build(cache, **kw):
    g = _C.CodegenGraph(fn, str(cache), None, True, **kw)
    first = g(*inputs())
    return g, first


def check_runs(g):
    args = inputs()
    torch.testing.assert_close(g(*args), fn(*args))


def libraries(cache):
    return sorted(p for p in os.listdir(cache) if p.endswith(".so"))


def test_cache_hit_in_process_and_in_a_new_process(tmp_path):
    g1, _ = build(tmp_path)
    assert g1.status == "compiled" and g1.timings["cache_hit"] is False and g1.source
    check_runs(g1)
    g2, _ = build(tmp_path)
    assert g2.status == "compiled" and g2.timings["cache_hit"] is True and g2.source == g1.source
    check_runs(g2)
    script = textwrap.dedent(f"""
        import sys, torch; sys.path.insert(0, {ROOT!r})
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_codegen_runtime import fn, inputs
        from kiln import _C
        g = _C.CodegenGraph(fn, {str(tmp_path)!r}, None, True)
        g(*inputs())
        args = inputs()
        torch.testing.assert_close(g(*args), fn(*args))
        print(g.status, g.timings["cache_hit"])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["compiled", "True"]
    assert len(libraries(tmp_path)) == 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "bad_check", "no_check"])
def test_damaged_cache_entry_is_rebuilt(tmp_path, damage):
    build(tmp_path)
    (lib,) = libraries(tmp_path)
    path = tmp_path / lib

    def replace(data):  # a new file, as another process would leave it (this one has it mapped)
        (tmp_path / "damaged").write_bytes(data)
        os.replace(tmp_path / "damaged", path)
    if damage == "truncate":
        replace(path.read_bytes()[:1000])
    elif damage == "garbage":
        replace(b"\x7fELF not really" * 100)
    elif damage == "bad_check":
        (tmp_path / (lib + ".check")).write_text("12 0000000000000000\n")
    else:
        os.remove(tmp_path / (lib + ".check"))
    g, first = build(tmp_path)
    assert g.status == "compiled" and g.timings["cache_hit"] is False
    check_runs(g)


def test_missing_compiler_falls_back_to_eager_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    g, first = build(tmp_path / "cache")
    assert g.status.startswith("eager: C++ compiler failed"), g.status
    assert "no-such-compiler" in g.status
    check_runs(g)


def test_failing_compiler_falls_back_to_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "false")
    g, _ = build(tmp_path)
    assert g.status.startswith("eager: C++ compiler failed") and not g.compiled
    check_runs(g)
    assert libraries(tmp_path) == []


def test_background_build_runs_eagerly_until_done(tmp_path):
    g, first = build(tmp_path, background=True)
    assert g.status in ("compiling", "compiled")
    check_runs(g)          # eager or compiled, whichever is ready: the same values
    g.wait()
    assert g.status == "compiled"
    check_runs(g)
    assert g.compiled


def test_background_builds_of_one_graph_in_parallel(tmp_path):
    graphs = [build(tmp_path, background=True)[0] for _ in range(3)]
    for g in graphs:
        g.wait()
        assert g.status == "compiled", g.status
        check_runs(g)
    assert len(libraries(tmp_path)) == 1


def test_background_build_failure_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "false")
    g, _ = build(tmp_path, background=True)
    g.wait()
    assert g.status.startswith("eager: C++ compiler failed")
    check_runs(g)


def many_rows(x):
    # Independent row reductions over different slices: many kernels, a large source.
    outs = [torch.softmax(x[i::7] * (i + 1), -1) for i in range(7)]
    outs += [F.layer_norm(x[:, i::5], (x[:, i::5].shape[-1],)) for i in range(5)]
    return tuple(outs)


def test_large_graph_compiles_as_several_units(tmp_path):
    g = _C.CodegenGraph(many_rows, str(tmp_path), None, True, jobs=2)
    g(torch.randn(70, 40))
    assert g.status == "compiled", g.status
    assert g.source.count("---- translation unit") == 2, "expected two translation units"
    x = torch.randn(70, 40)
    for a, b in zip(g(x), many_rows(x)):
        torch.testing.assert_close(a, b)


def test_output_code_and_perf_logs(tmp_path):
    env = dict(os.environ, KILN_LOGS="aten_graph,loop_ir,output_code,perf", KILN_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    script = textwrap.dedent("""
        import torch, kiln
        import torch.nn.functional as F
        f = kiln.compile(lambda x, w: F.layer_norm(F.gelu(x * w) + x, (16,)))
        x, w = torch.randn(4, 16), torch.randn(16)
        f(x, w); f(x, w)
    """)
    err = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stderr
    assert "[kiln:output_code]" in err and "KILN_EXPORT void kernel0" in err
    # The kernel's header comment names the ATen nodes it fuses.
    assert "aten::native_layer_norm" in err and "aten::gelu" in err and "aten::mul" in err
    assert "[kiln:aten_graph] %0 = input 0 : f32[4, 16]{16, 1}" in err
    assert "[kiln:loop_ir]" in err and "r0 = welford over[16]" in err
    assert "[kiln:perf] codegen: trace=" in err and "compile=" in err and "1 kernels, 0 extern calls; compiled" in err


def test_buffer_reuse_between_kernels(tmp_path):
    # relu -> mm -> relu -> mm -> ...: each kernel output is released after the extern that
    # reads it, and the next same-sized kernel output takes over its memory.
    w = torch.randn(16, 16)

    def f(x):
        for _ in range(4):
            x = torch.mm(torch.sigmoid(x) * 2, w)
        return x.relu()
    g = _C.CodegenGraph(f, str(tmp_path), None, True)
    g(torch.randn(16, 16))
    assert "reuses buf" in g.program_text, g.program_text
    for _ in range(3):
        x = torch.randn(16, 16)
        torch.testing.assert_close(g(x), f(x))


def test_no_reuse_of_memory_an_extern_view_still_holds(tmp_path):
    # a.t() is an ATen view of a's memory that outlives a's last direct use: a's memory must not
    # be handed to the next kernel output while the view is alive.
    def f(x, y):
        a = x.exp()
        v = a.t()
        c = (torch.mm(v, y) * 2).sin()   # same size as a, allocated after a's release
        return torch.mm(c, v)
    g = _C.CodegenGraph(f, str(tmp_path), None, True)
    g(torch.randn(8, 8), torch.randn(8, 8))
    assert "reuses buf" in g.program_text, g.program_text   # planned; refused at run time
    for _ in range(3):
        x, y = torch.randn(8, 8), torch.randn(8, 8)
        torch.testing.assert_close(g(x, y), f(x, y), rtol=1e-4, atol=1e-4)


def test_views_made_without_the_dispatcher_keep_eager_aliasing(tmp_path):
    # Views that stay inside the graph are made directly from the traced layout (CPU and CUDA);
    # one that is returned, or feeds a returned view, goes through ATen so the caller gets a real
    # view (_base, version counter) as in eager.
    def f(x, w):
        a = (x * 2).relu() @ w
        v = a.view(2, 8)
        out = v.t()    # eager: a view whose _base is a, [4, 4], not v
        inner = a.view(8, 2)[1] @ w.t().reshape(2, 8)
        return out, inner, x.t()
    g = _C.CodegenGraph(f, str(tmp_path), None, True)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    g(x, w)
    for _ in range(3):
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        got, want = g(x, w), f(x, w)
        torch.testing.assert_close(got, want)
        assert got[0]._is_view() and got[0]._base.shape == want[0]._base.shape
        assert got[2]._base is x
        got[2].mul_(2)  # a write through the returned view reaches the input, as in eager
        torch.testing.assert_close(x.t(), got[2])


def test_first_call_returns_real_views_of_inputs():
    # The first call returns the traced run's results, computed on functional wrappers of the
    # inputs: x[1] shared x's memory but was not a view of it (no _base, its own version
    # counter, so an in-place write through it did not mark x modified for autograd).
    def f(x, w):
        return x[1], x.t(), x.split(2)[1], (x @ w).relu()
    for call in range(2):
        g = kiln.compile(f)
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        outs = g(x, w) if call == 0 else (g(x, w), g(x, w))[1]
        for o in outs[:3]:
            assert o._is_view() and o._base is x
        before = x._version
        outs[0].mul_(2)
        assert x._version > before
        torch.testing.assert_close(x[1], outs[0])


def test_first_capture_does_not_import_dynamo():
    # PyTorch's Python meta kernels would import torch._dynamo (seconds) on first use; kiln's
    # stand-ins keep it out, and switch to the real torch._dynamo.disable once it is loaded.
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        import torch, kiln
        import torch.nn.functional as F
        f = kiln.compile(lambda x: F.layer_norm(F.gelu(x), (8,)) * torch.rsqrt(x.abs() + 1))
        x = torch.randn(3, 8)
        torch.testing.assert_close(f(x), F.layer_norm(F.gelu(x), (8,)) * torch.rsqrt(x.abs() + 1))
        assert "torch._dynamo" not in sys.modules, "dynamo imported"
        import torch._dynamo
        m = torch.empty(3, 8, device="meta")
        assert F.layer_norm(m, (8,)).shape == (3, 8)
        g = torch.compile(lambda x: F.layer_norm(x, (8,)) + 1, backend="eager")
        torch.testing.assert_close(g(x), F.layer_norm(x, (8,)) + 1)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_concurrent_runs_keep_their_own_index_errors(tmp_path):
    # Two threads run one compiled graph at once (the GIL is released while kernels run): the one
    # with a bad index must raise every time, the other must never be disturbed.
    import threading
    g = _C.CodegenGraph(lambda x, i: torch.gather(x, 1, i) * 2, str(tmp_path), None, True)
    x = torch.randn(256, 512)
    good = torch.randint(0, 512, (256, 512))
    bad = good.clone()
    bad[200, 300] = 512
    g(x, good)
    assert g.status == "compiled"
    ref = torch.gather(x, 1, good) * 2
    failures = []

    def run_good():
        for _ in range(150):
            if not torch.equal(g(x, good), ref):
                failures.append("wrong result")

    def run_bad():
        for _ in range(150):
            try:
                g(x, bad)
                failures.append("missed error")
            except RuntimeError:
                pass
    threads = [threading.Thread(target=run_good), threading.Thread(target=run_bad)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_capture_check_of_reduce_overhead():
    """kiln/_cudagraphs.py's per-call check (C++): a capture serves calls whose parameters are the
    captured storage and whose other tensors have the captured layouts. Runs on CPU tensors (the
    check reads only metadata and addresses)."""
    import torch.nn as nn
    from kiln import _C
    w, b = nn.Parameter(torch.randn(4, 3)), nn.Parameter(torch.randn(4))
    x = torch.randn(2, 3)
    check = _C.CaptureCheck((w, b, x), nn.Parameter)
    assert check((w, b, torch.randn(2, 3)))          # new input values, same layout
    assert check([w, b, x])
    assert not check((w, b))                           # another arity
    assert not check((w, b, torch.randn(3, 3)))       # another shape
    assert not check((w, b, torch.randn(3, 2).t()))   # another stride
    assert not check((w, b, torch.randn(2, 3, dtype=torch.float64)))
    assert not check((w, b, nn.Parameter(torch.randn(2, 3))))  # a parameter where the capture copies
    assert not check((w, b, 1.0))
    w2 = nn.Parameter(torch.randn(4, 3))
    assert not check((w2, b, x))                       # a parameter with other storage
    w.data = torch.randn(4, 3)
    assert not check((w, b, x))                        # the same parameter given new storage
    with pytest.raises(TypeError):
        _C.CaptureCheck((w, "not a tensor"), nn.Parameter)


def test_generated_kernels_show_in_torch_profiler():
    # Each kernel is recorded under "kiln::kernelN (its ATen operators)", beside the extern
    # calls the dispatcher records; with the profiler off nothing is recorded.
    from torch.profiler import profile

    def fn(x, w):
        return torch.softmax(torch.relu(x @ w) + 1, -1)

    f = kiln.compile(fn)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    f(x, w)
    f(x, w)
    with profile() as p:
        torch.testing.assert_close(f(x, w), fn(x, w))
    names = [e.key for e in p.key_averages()]
    kernels = [n for n in names if n.startswith("kiln::kernel")]
    assert kernels, names
    assert any("_softmax" in n and "relu" in n for n in kernels), kernels
    assert "aten::mm" in names


_MMAP_SCRIPT = r"""
import ctypes, torch, kiln
class MallInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo
f = kiln.compile(lambda x: x * 2)
f(torch.ones(4))  # the first CPU graph: glibc's thresholds are set here
before = libc.mallinfo2().hblkhd  # bytes in blocks malloc mapped on their own
t = torch.empty(5 << 20)  # 20 MB
print((libc.mallinfo2().hblkhd - before) >> 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer replaces glibc's malloc (scripts/sanitize.sh)")
@pytest.mark.parametrize("tuning", ["1", "0"])
def test_cpu_malloc_tuning_serves_large_buffers_from_the_heap(tuning):
    # With the tuning a 20 MB buffer comes from the heap, whose freed top glibc keeps (up to 64
    # MB); without it, from a mapping of its own that free() unmaps, so every call that makes it
    # again faults its pages in again.
    env = dict(os.environ, KILN_CPU_MALLOC_TUNING=tuning)
    out = subprocess.run([sys.executable, "-c", _MMAP_SCRIPT], env=env, capture_output=True, text=True, check=True)
    mapped_mb = int(out.stdout.strip().splitlines()[-1])
    assert mapped_mb == (0 if tuning == "1" else 20), out.stdout
