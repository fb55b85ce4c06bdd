"""Bugs the fuzzer's float-argument programs found (tests/fuzz/floats.py), each reduced to the
program that showed it, compiled vs eager."""
import operator

import pytest
import torch

import kiln
from conftest import assert_same

BACKENDS = ["eager", "aot_eager", "kiln"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_declined_graph_that_wrote_an_input_with_a_dynamic_int(backend):
    # The graph declined (an output is a view of an input it writes); kiln then checked which
    # inputs were tensors with the error still pending: SystemError instead of eager's result.
    def f(x, n):
        x.add_(1)
        return x[n]

    c = kiln.compile(f, backend=backend)
    for n in (1, 2, 3):
        a, b = torch.zeros(4), torch.zeros(4)
        assert_same(c(a, n), f(b, n))
        assert_same(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_minus_zero_is_not_zero(backend):
    # A float specialised to -0.0 served 0.0 (the guard compared with ==): 1 / t came out -inf.
    c = kiln.compile(lambda x, t: (x / t, str(t)), backend=backend, dynamic=False)
    for t in (-0.0, 0.0, -0.0):
        assert_same(c(torch.ones(2), t), (torch.ones(2) / t, str(t)))
    assert kiln.stats()["graphs"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_float_modulo_gives_a_zero_the_divisors_sign(backend):
    f = lambda x, t: (x / (t % 1.0), t % -1.0)  # noqa: E731
    c = kiln.compile(f, backend=backend)
    for t in (0.5, 0.25, -3.0, 3.0, -0.5):
        got, want = c(torch.ones(2), t), f(torch.ones(2), t)
        assert_same(got[0], want[0])
        assert got[1] == want[1] and str(got[1]) == str(want[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_constant_base_of_a_power(backend):
    # fx printed `pow_1 = -2.0 ** x`, which Python reads as -(2.0 ** x).
    c = kiln.compile(lambda x: ((-2.0) ** x, (-0.0) ** x, (-3) ** x), backend=backend)
    x = torch.tensor([2.0, 3.0, 0.5, 0.0])
    for _ in range(2):
        assert_same(c(x), ((-2.0) ** x, (-0.0) ** x, (-3) ** x))


@pytest.mark.parametrize("op", [lambda x, b: torch.clamp(x, min=b), lambda x, b: torch.clamp(x, max=b),
                                lambda x, b: x.clamp_min(b), lambda x, b: torch.clamp(x, b, b + 1)])
def test_a_nan_bound_of_clamp_in_generated_code(op):
    # The generated kernel's x < lo ? lo : x ignored a NaN bound; eager's clamp gives NaN.
    c = kiln.compile(lambda x: op(x, float("nan")) * 2)
    x = torch.randn(16)
    for _ in range(3):
        assert_same(c(x), op(x, float("nan")) * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dynamic_float_times_a_0d_half_tensor_is_not_rounded_first(backend):
    # Eager multiplies (divides) a 0-d float16 tensor by a Python float in float32 and rounds
    # once; the dynamic float was cast to float16 first (x.sum() * 1.0039: 3.0 vs eager's 3.0156).
    def f(x, t):
        s = x.to(torch.float16).sum()
        return s * t, s / t, t * s, s + t

    c = kiln.compile(f, backend=backend)
    g = torch.Generator().manual_seed(0)
    for i in range(40):
        x, t = torch.randn(10, generator=g), float(torch.empty(()).uniform_(-3, 3, generator=g))
        got, want = c(x, t), f(x, t)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and torch.equal(a, b), (i, t, a, b)
    assert kiln.stats()["graphs"] == 2


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except RuntimeError as e:
        return None, str(e)


INPLACE_CAST = {
    # PyTorch's meta kernels of these in-place operators do not check that the result dtype can be
    # cast to the written tensor's, and functionalization writes the cast result: kiln's
    # generated code returned int(x * 0.5) where eager raises (fuzz seed 886).
    "int_mul_float": lambda a: a.clone().mul_(0.5),
    "int_argument_mul_float": lambda a: a.mul_(1.5),
    "int_imul_float": lambda a: operator.imul(a + 1, 0.5),
    "int_mul_float_tensor": lambda a: (a + 1).mul_(a * 0.5),
    "int_addcmul": lambda a: (a + 1).addcmul_(a.float(), a.float()),
    "int_addcdiv": lambda a: (a + 1).addcdiv_(a.float(), a.float()),
    "int_ldexp": lambda a: (a + 1).ldexp_(a),
    "bool_mul_int": lambda a: (a > 0).mul_(2),
    "bool_cumsum": lambda a: (a > 0).cumsum_(0),
    # allowed in place (the result's dtype casts): still compiled, same values
    "int_mul_int": lambda a: (a + 1).mul_(3),
    "float_mul_double_tensor": lambda a: a.float().mul_(torch.tensor([0.5], dtype=torch.float64)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(INPLACE_CAST))
def test_an_in_place_result_that_cannot_be_cast_raises_as_eager(backend, case):
    fn = INPLACE_CAST[case]
    x = torch.tensor([2, -1, 3])
    want, want_err = _outcome(fn, x.clone())
    got, got_err = _outcome(kiln.compile(fn, backend=backend), x.clone())
    assert got_err == want_err
    if want_err is None:
        assert_same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dynamic_float_divides_a_0d_tensor_in_place_in_its_dtype(backend):
    # `t.div_(p)` on a 0-d float32 t computes in float32 with a Python float (1e-300 is 0 there:
    # 0 / 0 = nan), but in float64 with the dynamic float's float64 tensor (0 / 1e-300 = 0): the
    # out-of-place form, not the written tensor, tells the dtype the operation computes in
    # (fuzz seed 1581).
    def f(x, p):
        t = x.clone()
        t.div_(p)
        u = x * 1
        u.mul_(p)
        v = x.clone()
        v.clamp_(p)
        return t, u, v

    c = kiln.compile(f, backend=backend)
    for x in (torch.tensor(0.0), torch.tensor(1.5), torch.tensor([0.0, 2.0])):
        for p in (-1.0, 3.0, 2.5, 1e-300, 0.1, 1e-46):
            assert_same(c(x, p), f(x, p))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("src", [torch.float32, torch.float64])
def test_a_float_out_of_integer_range_converts_as_eager_also_when_fused(dtype, src):
    # NaN, inf and values out of the integer type's range: C++'s float -> integer conversion is
    # undefined there, and GCC folded the fused float -> integer -> float into trunc(): log(x).int()
    # + 0.5 kept NaN where eager has -2147483648 (fuzz seed 2249).
    def f(x):
        return x.to(dtype), x.to(dtype) + 0.5, torch.log(x).to(dtype) + 0.5

    vals = [float("nan"), float("inf"), -float("inf"), 1e20, -1e20, 300.7, -300.7, 40000.5, 3e9, -3e9, 2.5, -0.5, 1e10, 0.0]
    c = kiln.compile(f)
    for n in (1, 33):
        x = torch.tensor(vals, dtype=src).repeat(n)
        for _ in range(2):
            assert_same(c(x), f(x))


@pytest.mark.skipif(not torch.backends.cpu.get_cpu_capability().startswith("AVX"), reason="x86 ATen's NaN signs")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_sign_of_a_nan_from_a_function_outside_its_domain(dtype):
    # libm's log / sqrt of x < 0 give x86's default NaN (sign bit set), ATen's kernels +NaN (and
    # the other way round for acos / asin): torch.copysign(a, log(t / s)) with s < 0 came out
    # negated (fuzz seed 6252). A NaN input keeps its sign.
    def f(x, a):
        ops = (torch.log(x), torch.log2(x), torch.log10(x), torch.sqrt(x), torch.pow(x, 0.5), torch.rsqrt(x),
               torch.acos(x), torch.asin(x), torch.log1p(x - 1))
        return [torch.copysign(a, v) for v in ops]

    c = kiln.compile(f)
    x = torch.tensor([-1.5, -0.0, 0.0, 0.25, 2.0, -3.0, float("nan"), -float("nan"), -float("inf")], dtype=dtype).repeat(5)
    a = torch.ones_like(x)
    for _ in range(3):
        for got, want in zip(c(x, a), f(x, a)):
            assert torch.equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", [lambda a, m, s: a.masked_fill(m, s), lambda a, m, s: a.clone().fill_(s),
                                lambda a, m, s: torch.where(m, a, s), lambda a, m, s: torch.clamp(a.float(), s),
                                lambda a, m, s: a.half() ** s, lambda a, m, s: a.masked_fill(m, s * 2)],
                         ids=["masked_fill", "fill_", "where", "clamp", "half_pow", "derived"])
@pytest.mark.filterwarnings("ignore:.*recompile limit")  # `s * 2` cannot be guarded: specialised per value
def test_a_dynamic_float_that_does_not_convert_to_the_filled_dtype_raises_as_eager(backend, op):
    # masked_fill / fill_ / where / clamp convert a Python float to the result's dtype with an
    # overflow check (inf or nan into an int tensor, 1e300 into a float32 one: "value cannot be
    # converted to type int without overflow"); the float64 tensor of a dynamic float converted
    # unchecked, and the graph filled INT_MIN (fuzz seed 10866).
    def f(a, m, s):
        return a * 1, op(a, m, s)

    m = torch.tensor([True, False, True, False])
    for dtype in (torch.int32, torch.int8):
        kiln.reset()
        c = kiln.compile(f, backend=backend)
        for s in (2.5, 1.5, 3.0, float("inf"), -7.0, float("nan"), 1e20, 4.0, 1e300, -1e39, 300.0, 0.5):
            a = torch.arange(4, dtype=dtype)
            try:
                want, want_err = f(a, m, s), None
            except RuntimeError as e:
                want, want_err = None, str(e)
            try:
                got, got_err = c(a, m, s), None
            except RuntimeError as e:
                got, got_err = None, str(e)
            assert got_err == want_err, (s, dtype)
            if want_err is None:
                assert_same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.int64])
def test_a_dynamic_float_on_the_left_of_a_tensor_runs_the_tensors_reflected_operator(backend, dtype):
    # `s * t` is t.__rmul__(s) = mul(t, s), and `s / t` is t.reciprocal() * s; with s a dynamic
    # float the graph ran mul(float64 tensor, t), which rounds s to float16 first (eager keeps it
    # in float32), and s / t rounded once where eager rounds twice: 1 ulp off (fuzz seed 14198).
    def f(t, s):
        return s * t, s / t, s + t, s - t

    c = kiln.compile(f, backend=backend)
    g = torch.Generator().manual_seed(0)
    for s in (0.3, 2.3284137316117572, 1.7, 0.77, -2.9, 5.123, 1.1):
        t = (torch.randn(4, 50, generator=g) * 3).to(dtype) if dtype.is_floating_point else torch.randint(1, 9, (4, 50), generator=g)
        for got, want in zip(c(t, s), f(t, s)):
            assert got.dtype == want.dtype
            assert torch.equal(got, want)


def test_tanh_of_a_negative_number_is_as_accurate_as_of_a_positive_one():
    # The generated float tanh computed 1 - 2 / (exp(2x) + 1) for x < 0 too, where exp(2x) + 1
    # rounds near 1: up to 3 ulp off, and tanh(-8.32) came out -1.0 (eager -0.99999988), so
    # `tanh(t).to(torch.int64)` gave -1 where eager gives 0 (fuzz training seed 14475).
    x = torch.cat([torch.linspace(0.55, 8.0, 20001), torch.tensor([8.320058822631836])])
    c = kiln.compile(lambda x: (torch.tanh(x), torch.tanh(-x), torch.tanh(-x).to(torch.int64)))
    for _ in range(2):
        pos, neg, ints = c(x)
    assert torch.equal(neg, -pos)
    assert torch.equal(ints, torch.tanh(-x).to(torch.int64))
    assert (neg != torch.tanh(-x)).float().mean() < 0.1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.filterwarnings("ignore:.*recompile limit")  # `(-7 // s) ** 3` cannot be guarded: specialised per value
def test_a_power_of_a_dynamic_float_that_overflows_raises_as_python_does(backend):
    # Python's float ** int raises OverflowError where a finite base gives an infinite power; the
    # graph computed the power on its float64 tensor and gave inf (fuzz seed 16308: `-7 // s`
    # with s = 1e-300, cubed). A float argument's power is guarded to stay finite; a derived
    # float's is specialised.
    def f(x, s):
        return x + s ** 2, x * (-7 // s) ** 3

    c = kiln.compile(f, backend=backend)
    for s in (0.5, 1.5, 2.5, 1e-300, 2e200, -1e160, 3.0, float("inf"), float("nan"), 1e-300):
        x = torch.ones(3, dtype=torch.float64)
        try:
            want, want_err = f(x, s), None
        except OverflowError as e:
            want, want_err = None, str(e)
        try:
            got, got_err = c(x, s), None
        except OverflowError as e:
            got, got_err = None, str(e)
        assert got_err == want_err, s
        if want_err is None:
            assert_same(got, want)


def test_a_dynamic_floats_square_stays_a_graph_input():
    # The guard against an overflowing power keeps `s ** 2` of a float argument dynamic.
    c = kiln.compile(lambda x, s: x * s ** 2 + s ** 3)
    for s in (0.5, 1.5, 2.5, -3.25, 1e100, 7.0):
        assert_same(c(torch.ones(3), s), torch.ones(3) * s ** 2 + s ** 3)
    assert kiln.stats()["graphs"] == 2
    with pytest.raises(OverflowError):
        c(torch.ones(3), 1e200)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_of_dynamic_floats_given_to_torch_tensor(backend):
    # Fuzz seed 20052: torch.tensor([p, -p]) in a capture where p was a graph input (the
    # remainder keeps it one) recorded the list of float64 tensors, from which torch.tensor makes
    # a float64 tensor where Python floats make a float32 one; a later call returned float64. A
    # dynamic float inside a list or tuple argument is now specialised like any other operand.
    def f(x, p):
        r = torch.remainder(x.mean(), p)
        t = torch.tensor([p, -p]) * 3
        return r, t / (p * p + 1)

    c = kiln.compile(f, backend=backend)
    for p in (0.3, 0.7, 0.0, 0.0, 0.0, 1.5):
        x = torch.randn(6, 1)
        assert_same(c(x, p), f(x, p))
