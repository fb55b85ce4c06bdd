"""Op-level end-to-end tests of kiln's code generator: each case runs through
kiln._C.CodegenGraph (trace on the first call, generated kernels on later calls) and is compared
with eager PyTorch on fresh random inputs: values, dtype, shape and strides."""
import pytest
import torch
import torch.nn.functional as F

from kiln import _C

TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10), torch.bfloat16: (2e-2, 2e-2)}


def make(shape, dtype, layout="contiguous"):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype == torch.int64:
        t = torch.randint(-5, 6, shape)
    else:
        t = torch.randn(shape, dtype=torch.float32).to(dtype)
    if layout == "transposed" and len(shape) >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "sliced" and len(shape) >= 1:
        big = make(shape[:-1] + (shape[-1] * 2,), dtype)
        t = big[..., ::2]
    return t


def check(fn, inputs_fn, expect_compiled=True):
    g = _C.CodegenGraph(fn, "", None, True)
    first = g(*inputs_fn())
    assert first is not None
    if expect_compiled:
        assert g.status == "compiled", g.status
    args = inputs_fn()
    got = g(*args)
    ref = fn(*args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if b.numel() > 1 and b.is_contiguous() != a.is_contiguous():
            pytest.fail(f"layout differs: {a.stride()} vs {b.stride()}")
        if b.dtype in TOL:
            rtol, atol = TOL[b.dtype]
            torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert torch.equal(a, b)
    return g


UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "floor": torch.floor,
    "ceil": torch.ceil, "square": torch.square, "hardswish": F.hardswish, "leaky_relu": F.leaky_relu,
    "elu": F.elu, "softplus": F.softplus, "clamp": lambda x: x.clamp(-0.5, 0.7), "sign": torch.sign,
    "erf": torch.erf, "log_abs": lambda x: torch.log(x.abs() + 1), "sqrt_abs": lambda x: (x.abs() + 0.1).sqrt(),
    "rsqrt_abs": lambda x: (x.abs() + 0.1).rsqrt(), "reciprocal": lambda x: 1.0 / (x.abs() + 0.5),
}
FLOATS = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary(name, dtype):
    fn = UNARY[name]
    check(lambda x: fn(x) * 2, lambda: (make((7, 33), dtype),))


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b * 2, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1), "maximum": torch.maximum, "minimum": torch.minimum,
    "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
    "where": lambda a, b: torch.where(a > b, a, b * 3),
}


# (true division of int64 is covered by test_int_ops)
@pytest.mark.parametrize("name,dtype", [(n, d) for n in sorted(BINARY) for d in (torch.float32, torch.float64, torch.int64)
                                        if not (n == "div" and d == torch.int64)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_binary(name, dtype, layout):
    fn = BINARY[name]

    def inputs():
        a = make((9, 17), dtype, "transposed" if layout == "transposed" else "contiguous")
        b = make((17,) if layout == "broadcast" else (9, 17), dtype)
        return a, b
    check(fn, inputs)


def test_int_ops():
    check(lambda a, b: (a * 3 + b, a // (b.abs() + 1), a % 4, a / 2, (a > 0) & (b < 2), ~(a > b)),
          lambda: (make((6, 5), torch.int64), make((6, 5), torch.int64)))


def test_bool_ops():
    check(lambda a, b: (a & b, a | b, a ^ b, ~a, torch.logical_not(a), a.to(torch.float32) + 1),
          lambda: (make((4, 9), torch.bool), make((4, 9), torch.bool)))


REDUCE = {
    "sum_last": lambda x: x.sum(-1), "sum_first": lambda x: x.sum(0), "sum_all": lambda x: x.sum(),
    "mean_keep": lambda x: x.mean(1, keepdim=True), "amax": lambda x: x.amax(-1), "amin0": lambda x: x.amin(0),
    "var": lambda x: x.var(-1), "std0": lambda x: x.std(0, correction=0), "var_mean": lambda x: torch.var_mean(x, 1),
    "prod": lambda x: (x * 0.1 + 1).prod(-1), "softmax": lambda x: x.softmax(-1), "softmax0": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(-1), "sum_exp_epilogue": lambda x: x / x.sum(-1, keepdim=True).abs().add(1),
    "multi_dim": lambda x: x.view(3, -1, x.shape[-1]).sum((0, 2)) if x.shape[0] % 3 == 0 else x.sum(),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_reduction(name, dtype, layout):
    check(REDUCE[name], lambda: (make((12, 37), dtype, layout),))


def test_reduction_bf16():
    check(lambda x: (x.sum(-1), x.softmax(-1), x.amax(0)), lambda: (make((8, 40), torch.bfloat16),))


def test_any_all_int_sum():
    check(lambda x: ((x > 0).any(-1), (x > -5).all(0), x.sum(1)), lambda: (make((5, 7), torch.int64),))


VIEWS = {
    "permute": lambda x: x.permute(2, 0, 1) * 2, "transpose": lambda x: x.transpose(0, 2).contiguous() + 1,
    "reshape": lambda x: x.reshape(-1, 6).exp(), "view_flat": lambda x: x.view(-1) * 3,
    "expand": lambda x: x[:, :1].expand(-1, 5, -1) + 1, "slice": lambda x: x[:, 1:4, ::2] * 2,
    "select": lambda x: x[:, 2] + x[1, 1:5], "squeeze": lambda x: x[:, :1].squeeze(1) - 1,
    "unsqueeze": lambda x: x.unsqueeze(1) * x.unsqueeze(0)[:, :, :1], "split": lambda x: [t * 2 for t in x.split(2, dim=1)],
    "chunk_sum": lambda x: sum(x.chunk(3, dim=2)), "cat": lambda x: torch.cat([x, x * 2], 1),
    "stack": lambda x: torch.stack([x, x + 1], 0), "unbind": lambda x: [t + 1 for t in x.unbind(0)],
    "t_matmul": lambda x: x.view(4, -1) @ x.view(4, -1).t(),
    "view_out": lambda x: x.view(4, -1), "transpose_out": lambda x: x.transpose(1, 2),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_views(name, dtype):
    check(VIEWS[name], lambda: (make((4, 6, 6), dtype),))


def test_layer_norm_fused_prologue():
    def f(x, w, b):
        return F.layer_norm(F.gelu(x * w + b) + x, (x.shape[-1],), w, b)
    g = check(f, lambda: (torch.randn(16, 64), torch.randn(64), torch.randn(64)))
    assert g.num_kernels == 1 and g.num_externs == 0


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm(dtype):
    ln = torch.nn.LayerNorm(24).to(dtype)
    check(lambda x, w, b: F.layer_norm(x, (24,), w, b), lambda: (make((3, 5, 24), dtype), ln.weight.detach() + 0.5, ln.bias.detach() + 0.1))


def test_batch_norm_inference():
    rm, rv = torch.randn(6), torch.rand(6) + 0.5
    w, b = torch.randn(6), torch.randn(6)
    check(lambda x: F.relu(F.batch_norm(x, rm, rv, w, b, training=False)), lambda: (torch.randn(2, 6, 5, 5),))


def test_embedding_and_arange():
    w = torch.randn(50, 8)
    check(lambda i: F.embedding(i, w) + torch.arange(i.shape[1]).unsqueeze(-1), lambda: (torch.randint(0, 50, (3, 7)),))


def test_embedding_out_of_range_raises():
    w = torch.randn(10, 4)
    g = _C.CodegenGraph(lambda i: F.embedding(i, w) * 2, "", None, True)
    g(torch.randint(0, 10, (5,)))
    assert g.status == "compiled"
    with pytest.raises(IndexError):
        g(torch.tensor([1, 2, 99]))


def test_masked_fill_tril_attention_mask():
    def f(att):
        t = att.shape[-1]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        return att.masked_fill(~mask, float("-inf")).softmax(-1)
    check(f, lambda: (torch.randn(2, 3, 8, 8),))


@pytest.mark.parametrize("shape", [(), (1,), (0, 4), (1, 1, 5), (3, 0)])
def test_degenerate_shapes(shape):
    check(lambda x: (x * 2 + 1).relu(), lambda: (torch.randn(shape),))


def test_scalar_and_casts():
    check(lambda x: ((x * 2.5).to(torch.int64), x.to(torch.bfloat16) * 2, x.double().sum(), x.to(torch.bool)),
          lambda: (torch.randn(6, 3) * 4,))


def test_input_mutation_is_applied():
    def f(x, y):
        x.add_(y)
        return x * 2
    g = _C.CodegenGraph(f, "", None, True)
    a, b = torch.randn(5), torch.randn(5)
    a0 = a.clone()
    out = g(a, b)
    torch.testing.assert_close(a, a0 + b)
    torch.testing.assert_close(out, (a0 + b) * 2)
    a1 = a.clone()
    out = g(a, b)
    assert g.status == "compiled"
    torch.testing.assert_close(a, a1 + b)
    torch.testing.assert_close(out, (a1 + b) * 2)


def test_extern_ops_mixed():
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    w, b = conv.weight.detach(), conv.bias.detach()
    check(lambda x: F.max_pool2d(F.relu(F.conv2d(x, w, b)), 2).flatten(1).softmax(-1), lambda: (torch.randn(2, 3, 8, 8),))


def _no_externs(g):
    assert g.num_externs == 0, g.program_text


# (input shape, kernel, stride, padding, dilation, ceil_mode): windows in the padding on both
# sides, rectangular windows, dilation, ceil_mode's last window past the end, a 3-D input.
MAX_POOLS = [((2, 4, 9, 9), 3, 2, 1, 1, False), ((2, 4, 9, 9), 3, 2, 1, 1, True), ((1, 3, 10, 7), (3, 2), (2, 1), (1, 0), 1, False),
             ((1, 3, 11, 11), 3, 2, 1, 2, False), ((1, 3, 11, 11), 3, 3, 1, 1, True), ((3, 8, 8), 2, None, 0, 1, False),
             ((1, 2, 5, 5), 5, 1, 2, 1, False), ((1, 2, 6, 6), 4, 3, 2, 1, True), ((2, 3, 7, 7), 1, 2, 0, 1, False)]


@pytest.mark.parametrize("case", MAX_POOLS, ids=str)
def test_max_pool2d_is_generated(case):
    """max_pool2d (indices unused) is a kernel, with the operators before it fused into it;
    padding never wins, and a NaN in a window gives NaN as in eager."""
    shape, k, s, p, d, ceil = case

    def inputs():
        x = torch.randn(shape)
        x.view(-1)[::17] = float("nan")
        x.view(-1)[5::23] = float("-inf")
        return (x,)
    _no_externs(check(lambda x: F.max_pool2d(torch.relu(x * 2) - 0.5, k, s, p, d, ceil_mode=ceil), inputs))
    _no_externs(check(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil) * 3, inputs))


def test_max_pool2d_channels_last_and_bfloat16():
    x_cl = lambda: (torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last),)  # noqa: E731
    _no_externs(check(lambda x: F.max_pool2d(x + 1, 3, 2, 1), x_cl))
    _no_externs(check(lambda x: F.max_pool2d(x, 2), lambda: (make((2, 3, 8, 6), torch.bfloat16),)))


def test_max_pool2d_with_indices_read_stays_aten():
    """return_indices=True: the indices are read, so the pooling is ATen's (one extern call)."""
    g = check(lambda x: F.max_pool2d(x * 2, 3, 2, 1, return_indices=True), lambda: (torch.randn(2, 4, 9, 9),))
    assert g.num_externs == 1, g.program_text


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("which", [torch.argmax, torch.argmin])
def test_argmax_argmin(dtype, dim, which):
    # Small integer ranges make ties common: the first position must win, as in eager.
    def inputs():
        x = torch.randint(-3, 4, (5, 37)).to(dtype) if dtype != torch.bfloat16 else make((5, 37), dtype)
        return (x,)
    _no_externs(check(lambda x: which(x, dim=dim), inputs))
    if dim is not None:
        _no_externs(check(lambda x: which(x.t(), dim=dim, keepdim=True), inputs))


def test_argmax_nan_wins():
    x = torch.randn(4, 40)
    x[1, 7] = float("nan")
    x[1, 30] = float("nan")
    x[2, 33] = float("nan")
    g = _C.CodegenGraph(lambda x: (torch.argmax(x, 1), torch.argmin(x, 1)), "", None, True)
    g(torch.randn(4, 40))
    for a, b in zip(g(x), (torch.argmax(x, 1), torch.argmin(x, 1))):
        assert torch.equal(a, b)


@pytest.mark.parametrize("where", [0, 1, 15, 16, 63, 64, 100, 130])
def test_max_min_softmax_propagate_nan_from_any_position(where):
    # A NaN anywhere in a row wins max/min and fills its softmax row: first in a lane, in the
    # vector body, in the tail, and in a lane that already holds a larger value.
    def fn(x):
        return x.amax(1), x.amin(1), torch.softmax(x, 1), torch.maximum(x, x * 0.5), torch.minimum(x * 0.5, x)
    g = _C.CodegenGraph(fn, "", None, True)
    g(torch.randn(3, 131))
    x = torch.randn(3, 131)
    x[0, where] = float("nan")
    x[2, :] = 100.0
    x[2, where] = float("nan")
    for a, b in zip(g(x), fn(x)):
        torch.testing.assert_close(a, b, equal_nan=True)
    _no_externs(g)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 5), 3), ((3, 8, 7), 2), ((1, 4, 2, 1), 2), ((2, 6), 3)])
def test_group_norm(dtype, shape, groups):
    w, b = torch.randn(shape[1]).to(dtype), torch.randn(shape[1]).to(dtype)
    g = check(lambda x: F.silu(F.group_norm(x, groups, w, b)), lambda: (make(shape, dtype),))
    _no_externs(g)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_index_select_and_gather(layout):
    src = lambda: make((6, 9), torch.float32, layout)
    _no_externs(check(lambda x, i: torch.index_select(x, 0, i) * 2, lambda: (src(), torch.randint(0, 6, (4,)))))
    _no_externs(check(lambda x, i: torch.index_select(x, 1, i).relu(), lambda: (src(), torch.randint(0, 9, (11,)))))
    _no_externs(check(lambda x, i: torch.gather(x, 1, i) + 1, lambda: (src(), torch.randint(0, 9, (6, 3)))))
    _no_externs(check(lambda x, i: torch.gather(x.exp(), 0, i), lambda: (src(), torch.randint(0, 6, (2, 9)))))


@pytest.mark.parametrize("bad", [4, -1])
def test_gather_out_of_range_raises_eagers_error(bad):
    # The kernel detects it; the graph then runs eagerly, so the exception is eager's own.
    g = _C.CodegenGraph(lambda x, i: torch.gather(x, 1, i), "", None, True)
    g(torch.randn(3, 4), torch.randint(0, 4, (3, 2)))
    assert g.status == "compiled"
    with pytest.raises(RuntimeError, match="out of bounds"):
        g(torch.randn(3, 4), torch.tensor([[0, 1], [2, bad], [0, 0]]))


def test_negative_embedding_index_raises():
    w = torch.randn(10, 4)
    g = _C.CodegenGraph(lambda i: F.embedding(i, w) * 2, "", None, True)
    g(torch.randint(0, 10, (5,)))
    with pytest.raises(IndexError):
        g(torch.tensor([1, -1, 3]))


def test_matmul_result_reshaped_is_not_copied():
    # at::matmul of a 3-d input is mm + _unsafe_view; the reshaped product is ATen's own view of
    # mm's fresh result (no copy kernel: a model's logits were copied, megabytes per call).
    g = check(lambda x, w: torch.matmul(x, w), lambda: (torch.randn(2, 5, 8), torch.randn(8, 16)))
    assert g.num_kernels == 0, g.program_text



def test_gelu_and_its_gradient_keep_their_relative_accuracy_in_the_negative_tail():
    # gelu(x) = x Phi(x) was 0.5 x (1 + erf(x / sqrt 2)): for x < -2 a small difference of numbers
    # near 1, 1.5e-4 relative error at x = -3, which `a2 / gelu(t3)` amplified (fuzz seed 15832).
    # Now Phi through an erfc of small relative error: within 2e-6 of float64 to x = -6, where
    # eager's own float32 result is off by more than 1e-2.
    x = torch.linspace(-6, 6, 24001)

    def fwd_bwd(x):
        return torch.nn.functional.gelu(x) * 1.0

    g = _C.CodegenGraph(fwd_bwd, "", None, True)
    for _ in range(2):
        xc = x.clone().requires_grad_(True)
        y = g(xc)
        y.sum().backward()
    assert g.training_status.startswith("compiled forward and backward"), g.training_status
    xr = x.double().requires_grad_(True)
    ref = fwd_bwd(xr)
    ref.sum().backward()
    tail = x < -1.5  # (the gradient crosses zero at -0.75, where no relative error is meaningful)
    for got, want in ((y, ref), (xc.grad, xr.grad)):
        got, want = got.detach().double(), want.detach()
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        rel = ((got - want).abs() / want.abs())[tail]
        assert float(rel.max()) < 2e-6, float(rel.max())
