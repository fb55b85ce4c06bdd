"""numpy on tensors is traced as torch operations (as Dynamo does through torch._numpy): the
array shares its tensor's graph value, numpy's own dtype promotion decides every result's dtype
and whether it is a numpy scalar, and what kiln cannot reproduce exactly is a graph break."""
import numpy as np
import pytest
import torch

import kiln


def same(a, e):
    assert type(a) is type(e), f"type {type(a)} != {type(e)}"
    if isinstance(e, torch.Tensor):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6, equal_nan=True)
    elif isinstance(e, (np.ndarray, np.generic)):
        assert a.dtype == e.dtype and np.shape(a) == np.shape(e), (a.dtype, e.dtype, np.shape(a), np.shape(e))
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, equal_nan=True)
    elif isinstance(e, (tuple, list)):
        assert len(a) == len(e)
        for x, y in zip(a, e):
            same(x, y)
    else:
        assert a == e


def run(fn, *args, breaks=0):
    kiln.reset()
    c = kiln.compile(fn, backend="eager")
    for _ in range(2):
        same(c(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]), fn(*args))
    s = kiln.stats()
    assert s["graph_breaks"] == breaks, s["breaks"]
    return s


X = torch.randn(4, 6)
XI = torch.randint(-5, 5, (4, 6), dtype=torch.int32)
XB = torch.randn(4, 6) > 0
XH = torch.randn(4, 6).half()

CASES = {
    "roundtrip_mul": lambda x: torch.from_numpy(x.numpy() * 2),
    "float_scalar_weak": lambda x: torch.from_numpy(x.numpy() + 0.5),
    "np_float64_strong": lambda x: torch.from_numpy(x.numpy() + np.float64(0.5)),
    "rsub_rdiv": lambda x: torch.from_numpy(1.0 - 3 / (x.numpy() + 10)),
    "compare": lambda x: torch.from_numpy(x.numpy() > 0.25),
    "compare_f64_scalar": lambda x: torch.from_numpy(x.numpy() >= np.float64(0.1)),
    "neg_pow": lambda x: torch.from_numpy(-(x.numpy() ** 2)),
    "ufuncs": lambda x: torch.from_numpy(np.exp(np.tanh(x.numpy())) + np.sqrt(np.abs(x.numpy()))),
    "isnan_where": lambda x: torch.from_numpy(np.where(np.isnan(x.numpy()), 0.0, x.numpy())),
    "clip": lambda x: torch.from_numpy(np.clip(x.numpy(), -0.5, 0.5)),
    "sum_axis": lambda x: torch.from_numpy(x.numpy().sum(axis=1)),
    "mean_keepdims": lambda x: torch.from_numpy(np.mean(x.numpy(), axis=0, keepdims=True)),
    "max_min": lambda x: torch.from_numpy(np.max(x.numpy(), axis=1) - x.numpy().min(axis=1)),
    "std_var": lambda x: torch.from_numpy(x.numpy().std(axis=0) + np.var(x.numpy(), axis=1, ddof=1).sum()),
    "reshape_T": lambda x: torch.from_numpy(x.numpy().reshape(6, 4).T.copy()),
    "astype": lambda x: torch.from_numpy(x.numpy().astype(np.float64) * 3),
    "concat_stack": lambda x: torch.from_numpy(np.concatenate([x.numpy(), x.numpy() * 2], axis=0) + np.stack([x.numpy()] * 2).sum(0).sum()),
    "matmul": lambda x: torch.from_numpy(x.numpy() @ x.numpy().T),
    "as_tensor_and_tensor": lambda x: torch.as_tensor(x.numpy() * 2) + torch.tensor(x.numpy()),
    "return_array": lambda x: x.numpy() * 2,
    "return_scalar": lambda x: x.numpy().sum(),
    "scalar_arith": lambda x: x.numpy().mean() * 2 + 1,
    "shape_ndim_dtype": lambda x: (x.numpy().shape, x.numpy().ndim, x.numpy().size, str(x.numpy().dtype)),
    "isinstance": lambda x: (isinstance(x.numpy(), np.ndarray), isinstance(x.numpy().sum(), np.floating)),
    "const_array": lambda x: x * torch.as_tensor(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)),
    "const_array_f64": lambda x: torch.as_tensor(np.array([[1, 2, 3, 4, 5, 6]]) / 2) + x,
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_traced_in_one_graph(name):
    run(CASES[name], X)


@pytest.mark.parametrize("x", [XI, XB, XH], ids=["int32", "bool", "float16"])
@pytest.mark.parametrize("name", ["sum", "mean", "div", "sqrt", "add_float", "compare"])
def test_numpy_dtype_promotion_matches_numpy(x, name):
    fn = {
        "sum": lambda x: x.numpy().sum(),
        "mean": lambda x: x.numpy().mean(axis=0),
        "div": lambda x: x.numpy() / 2,
        "sqrt": lambda x: np.sqrt(x.numpy()),
        "add_float": lambda x: x.numpy() + 1.5,
        "compare": lambda x: x.numpy() == 1,
    }[name]
    try:
        expected = fn(x)
    except Exception as e:  # noqa: BLE001  numpy refuses (bool - bool...): kiln must raise the same
        with pytest.raises(type(e)):
            kiln.compile(fn, backend="eager")(x)
        return
    kiln.reset()
    got = kiln.compile(fn, backend="eager")(x)
    same(got, expected)


def test_data_dependent_float_of_numpy_scalar_is_a_break():
    def f(x):
        m = x.detach().numpy().mean()
        return x - float(m)
    s = run(f, X, breaks=1)
    assert "data-dependent" in s["breaks"][0]["reason"]


def test_branch_on_numpy_value_is_a_break():
    def f(x):
        if x.numpy().sum() > 0:
            return x + 1
        return x - 1
    run(f, X, breaks=1)
    run(f, -X.abs(), breaks=1)


@pytest.mark.parametrize("fn", [
    lambda x: x.numpy(),                                   # requires grad: RuntimeError in eager
    lambda x: np.sin(x),
], ids=["numpy_of_grad", "ufunc_of_grad"])
def test_numpy_of_a_tensor_that_requires_grad_raises_as_in_eager(fn):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        fn(x)
    with pytest.raises(RuntimeError):
        kiln.compile(fn, backend="eager")(x)


def test_inplace_on_array_is_a_break_and_writes_the_tensor():
    def f(x):
        a = x.numpy()
        a += 1
        return x * 2
    x = torch.randn(4)
    e = f(x.clone())
    got = kiln.compile(f, backend="eager")(x.clone())
    torch.testing.assert_close(got, e)
    assert kiln.stats()["graph_breaks"] >= 1


def test_tensor_written_after_numpy_view_is_not_traced_wrong():
    def f(x):
        a = x.numpy()
        x.mul_(2)
        return torch.from_numpy(a + 1)
    x = torch.randn(4)
    e = f(x.clone())
    got = kiln.compile(f, backend="eager")(x.clone())
    torch.testing.assert_close(got, e)


def test_numpy_function_of_a_tensor_is_a_break():
    f = lambda x: np.sin(x) * 2  # noqa: E731  (eager: a Tensor, through Tensor.__array_wrap__)
    run(f, X, breaks=1)


def test_float_to_int_astype_is_a_break():
    f = lambda x: torch.from_numpy((x.numpy() * 100).astype(np.int32))  # noqa: E731
    run(f, X, breaks=1)


def test_numpy_with_kiln_backend():
    f = CASES["ufuncs"]
    kiln.reset()
    c = kiln.compile(f)
    same(c(X), f(X))
    assert kiln.stats()["graph_breaks"] == 0


def test_from_numpy_is_a_new_tensor_object():
    def f(x):
        t = torch.from_numpy(x.numpy())
        return t is x, t
    x = torch.randn(3)
    got = kiln.compile(f, backend="eager")(x)
    assert got[0] is False
    torch.testing.assert_close(got[1], x)


def test_integer_power_with_an_array_exponent_is_a_break():
    def f(x):
        i = x.numpy()
        return torch.from_numpy(2 ** i + i ** 2)
    x = torch.arange(-3, 3, dtype=torch.int64)
    with pytest.raises(ValueError):
        f(x)
    with pytest.raises(ValueError):
        kiln.compile(f, backend="eager")(x)


def test_out_argument_after_numpy_view_is_a_break():
    def f(x, y):
        a = x.numpy()
        torch.add(y, 1, out=x)
        return torch.from_numpy(a * 2)
    x, y = torch.randn(3), torch.randn(3)
    e = f(x.clone(), y)
    torch.testing.assert_close(kiln.compile(f, backend="eager")(x.clone(), y), e)


# numpy arrays handed to the function are graph inputs (torch.from_numpy of each call's array).

def _standardize(a, b):
    return (a - a.mean(axis=0)) / (a.std(axis=0) + 1.0) + np.sin(b).sum(axis=1, keepdims=True)


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_arrays_as_inputs_are_captured_without_recompiles(backend, dtype):
    c = kiln.compile(_standardize, backend=backend)
    for _ in range(4):
        a, b = np.random.randn(5, 3).astype(dtype), np.random.randn(5, 7).astype(dtype)
        same(c(a, b), _standardize(a, b))
    s = kiln.stats()
    assert (s["graphs"], s["recompiles"], s["graph_breaks"]) == (1, 0, 0), s
    assert "check_ndarray(L['a']" in s["graph_records"][0]["guards"]


def test_numpy_array_inputs_follow_automatic_dynamic_shapes():
    def f(a):
        return (a * 2).sum(axis=1), a.max()
    c = kiln.compile(f)
    for n in (4, 5, 9, 2, 13):
        a = np.random.randn(n, 6)
        same(c(a), f(a))
    s = kiln.stats()
    assert (s["graphs"], s["recompiles"], s["graph_breaks"]) == (2, 1, 0), s
    assert "actual shape (5, 6)" in s["recompile_reasons"][0]


def test_numpy_array_input_layout_and_format_are_guarded():
    def f(a):
        return a * 3
    c = kiln.compile(f, dynamic=False)
    base = np.arange(24.0).reshape(4, 6)
    for a in (base, base[:, ::2].copy(), base[:, ::2], base.T, base.astype(np.float32), base.astype(np.int64)):
        same(c(a), f(a))
    assert kiln.stats()["recompiles"] == 5


def test_numpy_arrays_kiln_cannot_share_stay_python_objects():
    def f(a):
        return a * 2
    ro = np.ones(3)
    ro.setflags(write=False)
    c = kiln.compile(f)
    same(c(ro), f(ro))
    swapped = np.ones(3, dtype=">f8")
    same(c(swapped), f(swapped))


def test_numpy_array_input_returned_is_the_same_object_and_writes_reach_it():
    def f(a, t):
        torch.from_numpy(a).mul_(2)
        return a, t + torch.from_numpy(a)
    c = kiln.compile(f)
    for _ in range(2):
        a, t = np.ones(3, dtype=np.float32), torch.randn(3)
        r = c(a, t)
        assert r[0] is a
        np.testing.assert_array_equal(a, np.full(3, 2.0, np.float32))
        torch.testing.assert_close(r[1], t + 2)


def test_function_of_numpy_arrays_only_is_compiled():
    def f(a):
        return np.exp(a) - 1
    c = kiln.compile(f)
    a = np.random.randn(8)
    same(c(a), f(a))
    assert kiln.stats()["graphs"] == 1 and kiln.stats()["skipped_frames"] == 0
