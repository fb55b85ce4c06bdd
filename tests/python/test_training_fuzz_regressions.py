"""Training-path bugs the program fuzzer found (tests/fuzz/training.py), each reduced to what it
covers. Every case compares with eager: values, gradients (None where eager leaves None)."""
import io

import pytest
import torch

import kiln


def _leaf(seed, *shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()


def test_input_reached_only_by_an_unused_output_keeps_grad_none():
    # The graph returns t (depends on x only) and the loss (depends on w only); backward of the
    # loss alone must leave x.grad None as eager does, not a tensor of zeros. The compiled node
    # saw zeros for the unused output (autograd materialized them) and returned a gradient for x.
    def f(x, w):
        t = x.where(x > 0, x * 2)
        loss = (w * w).sum()
        return t, loss

    cf = kiln.compile(f)
    for step in range(3):  # the first call traces; later calls run the compiled pair
        xe, we, xc, wc = _leaf(0, 4, 4), _leaf(1, 3), _leaf(0, 4, 4), _leaf(1, 3)
        te, le = f(xe, we)
        tc, lc = cf(xc, wc)
        le.backward()
        lc.backward()
        assert xe.grad is None
        assert xc.grad is None, f"step {step}: x.grad should stay None"
        torch.testing.assert_close(wc.grad, we.grad)
        torch.testing.assert_close(tc, te)
        # an output that is used still gets its gradient through the compiled backward
        te, le = f(xe, we)
        tc, lc = cf(xc, wc)
        (te * 3).sum().backward()
        (tc * 3).sum().backward()
        torch.testing.assert_close(xc.grad, xe.grad)
        assert we.grad is not None and wc.grad is not None
        torch.testing.assert_close(wc.grad, we.grad)


def test_unused_module_in_graph_keeps_parameter_grads_none():
    emb = torch.nn.Embedding(5, 2)
    lin = torch.nn.Linear(4, 2)

    def f(idx, x):
        e = emb(idx)
        unused = lin(x)  # noqa: F841  (kept alive across the break below)
        loss = e.abs().mean()
        print("break", file=io.StringIO())
        return loss, unused

    cf = kiln.compile(f)
    idx = torch.tensor([0, 3, 1])
    x = torch.randn(3, 4)
    for _ in range(3):
        for p in lin.parameters():
            p.grad = None
        loss, _ = cf(idx, x)
        loss.backward()
        assert lin.weight.grad is None and lin.bias.grad is None


def test_output_viewing_a_training_input_can_be_written_in_place():
    # `t3[0].fill_(0.5)` on a non-leaf: kiln's shape propagation broke the graph at the fill_, so
    # the graph before it returned t3[0], a view of its input t3, and the fill_ ran eagerly on it.
    # From kiln's autograd node that view was "created inside a custom Function" and the write
    # raised; eager writes through to t3 (autograd rebases t3's history).
    def f(x):
        t1 = x + 0
        t3 = t1.narrow(0, 0, 1) * 1
        t3[0].fill_(0.5)
        return t3, (t1 * t3).sum()

    cf = kiln.compile(f)
    for _ in range(3):
        xe, xc = _leaf(2, 13, dtype=torch.float64), _leaf(2, 13, dtype=torch.float64)
        outs = []
        for fn, x in ((f, xe), (cf, xc)):
            t3, s = fn(x)
            (s + t3.sum()).backward()
            outs.append((t3.detach(), s.detach()))
        torch.testing.assert_close(outs[1], outs[0])
        torch.testing.assert_close(xc.grad, xe.grad)


def test_output_viewing_another_output_can_be_written_in_place():
    def f(x):
        t1 = x + 0
        t2 = t1.narrow(0, 0, 1)
        t3 = t2 * 1
        return t1, t2, t3

    cf = kiln.compile(f)
    for _ in range(3):
        xe, xc = _leaf(3, 13, dtype=torch.float64), _leaf(3, 13, dtype=torch.float64)
        res = []
        for fn, x in ((f, xe), (cf, xc)):
            t1, t2, t3 = fn(x)
            t2.fill_(0.5)  # writes through to t1 in eager
            t3[0].fill_(0.25)
            (t1 * t1).sum().add((t3 * x[:1]).sum()).backward()
            res.append((t1.detach(), t3.detach()))
        torch.testing.assert_close(res[1], res[0])
        torch.testing.assert_close(xc.grad, xe.grad)


def test_input_whose_gradient_formula_ignores_the_output_gradient_keeps_grad_none():
    # copysign(p1, p0) gives p0 a gradient of zeros without reading the output's gradient: the
    # unused output t2 still must not give p0 a .grad (eager leaves it None). Which inputs an
    # output reaches is read off the autograd graph at trace time (trace_joint).
    def f(p0, p1):
        t2 = torch.copysign(p1, p0)
        t3 = p1 * 1
        t3.sqrt_()
        loss = t3.sigmoid().sum()
        return loss, t2

    cf = kiln.compile(f)
    for step in range(3):
        res = []
        for fn in (f, cf):
            p0, p1 = _leaf(4, 5, 3), _leaf(5, 10, 3)[::2].detach().requires_grad_()
            loss, _ = fn(p0, p1)
            loss.backward()
            res.append((p0.grad, p1.grad))
        assert res[0][0] is None
        assert res[1][0] is None, f"step {step}: p0.grad should stay None"
        torch.testing.assert_close(res[1][1], res[0][1], equal_nan=True)


def test_a_leaf_made_inside_the_function_keeps_autograd():
    # `t.detach().requires_grad_()` makes a new leaf: what reads it records autograd in eager. A
    # graph called without gradients returned a tensor with no grad_fn (fuzz seed 2057).
    def f(a):
        t = (a * 3).exp()
        out = t.detach().requires_grad_() * 2
        out.sum().backward()
        return out

    c = kiln.compile(f)
    for _ in range(2):
        a = torch.randn(4, dtype=torch.float64)
        r, e = c(a), f(a)
        assert r.requires_grad and e.requires_grad and r.grad_fn is not None
        torch.testing.assert_close(r, e)


def test_dropout_of_a_non_contiguous_tensor_draws_eagers_mask():
    # Eager fills `empty_like(x)` in place, in x's memory order; the functional bernoulli the trace
    # records fills a tensor of its own layout, which put the mask on other elements (fuzz seed
    # 2969). Such a graph runs op by op, and a trace that fails leaves the generator untouched.
    def f(x):
        return torch.nn.functional.dropout(x.t() * 2, 0.3, training=True) + 1

    c = kiln.compile(f)
    for i in range(3):
        x = torch.randn(8, 6)
        torch.manual_seed(i)
        r = c(x)
        torch.manual_seed(i)
        assert torch.equal(r, f(x))

    def g(p):
        return torch.dropout(torch.tanh(p[::2]), 0.25, True).clamp_min(0.1).sum()

    cg = kiln.compile(g)
    p_e = torch.randn(11, 11).t().requires_grad_()
    p_k = p_e.detach().clone().requires_grad_()
    for i in range(3):
        torch.manual_seed(10 + i)
        le = g(p_e)
        le.backward()
        torch.manual_seed(10 + i)
        lk = cg(p_k)
        lk.backward()
        torch.testing.assert_close(lk, le)
        torch.testing.assert_close(p_k.grad, p_e.grad)


def test_training_graph_of_empty_tensors_takes_any_strides():
    # An empty tensor has no element to address; the compiled backward refused gradients whose
    # strides differed from the traced ones ("input 7 differs from the traced one", fuzz seed 4946).
    def f(p1, p2):
        t2 = torch.sub(p1, p1, alpha=0.5)
        t9 = t2 / torch.hypot(t2, torch.ones(()))
        return t2.roll(1, 0).sum() * 0.5 + t9.tanh().sum() + torch.nn.functional.l1_loss(p1, p2, reduction="sum")

    c = kiln.compile(f)
    for n in (1, 0, 0):
        p1 = torch.randn(1, 4).expand(n, 4).requires_grad_()
        p2 = torch.randn(n, 1).expand(n, 4).requires_grad_()
        q1, q2 = p1.detach().clone().requires_grad_(), p2.detach().clone().requires_grad_()
        c(p1, p2).backward()
        f(q1, q2).backward()
        torch.testing.assert_close(p1.grad, q1.grad)
        torch.testing.assert_close(p2.grad, q2.grad)


def test_an_unused_outputs_formula_does_not_put_nan_into_a_used_gradient():
    # fmod(a, b)'s gradient for b is -grad * trunc(a / b): with b == 0 that is 0 * inf = NaN when
    # the output gets a zero gradient. Eager never runs the formula of an output the loss does
    # not use; the compiled backward is built without it (not fed zeros).
    def f(p, a):
        b = p * (p > 10)  # all zeros, still differentiable in p
        t = torch.fmod(a, b)
        loss = p.clamp_min(0.1).abs().mean()
        return t, loss

    cf = kiln.compile(f)
    a = torch.randn(4, 1)
    for step in range(3):
        pe, pc = _leaf(3, 4, 1), _leaf(3, 4, 1)
        te, le = f(pe, a)
        tc, lc = cf(pc, a)
        le.backward()
        lc.backward()
        assert torch.isfinite(pe.grad).all()
        torch.testing.assert_close(pc.grad, pe.grad, msg=f"step {step}")
        torch.testing.assert_close(tc, te, equal_nan=True)
    # both outputs used: the whole backward, NaN and all, as eager
    pe, pc = _leaf(3, 4, 1), _leaf(3, 4, 1)
    te, le = f(pe, a)
    tc, lc = cf(pc, a)
    (te.sum() + le).backward()
    (tc.sum() + lc).backward()
    torch.testing.assert_close(pc.grad, pe.grad, equal_nan=True)


def test_an_unused_input_with_no_derivative_in_its_history_is_not_visited_by_backward():
    # q // q has no derivative (its grad_fn raises when run). The graph takes it as an input it
    # does not use (as a resume function takes the frame's live tensors); backward of the loss
    # must not reach it, as in eager.
    def f(p, t):
        return p.sigmoid().sum()

    cf = kiln.compile(f)
    for _ in range(3):
        pe, pc, q = _leaf(4, 8), _leaf(4, 8), _leaf(6, 8)
        f(pe, q // q).backward()
        cf(pc, q // q).backward()
        torch.testing.assert_close(pc.grad, pe.grad)
        assert q.grad is None


def test_an_input_written_in_place_after_the_call_is_checked_only_where_backward_reads_it():
    # mse_loss saves `a` for its backward; `a` is then written in place. The loss does not use
    # the mse output, so eager's backward never checks `a`: neither may the compiled node's.
    def f(p, a):
        t = p[None]
        m = torch.nn.functional.mse_loss(t, a)
        u = t.nan_to_num() * t
        return m, u

    cf = kiln.compile(f)
    for _ in range(3):
        ae, ac = torch.randn(1, 2, 3), torch.randn(1, 2, 3)
        ac.copy_(ae)
        pe, pc = _leaf(5, 2, 3), _leaf(5, 2, 3)
        _, ue = f(pe, ae)
        mc, uc = cf(pc, ac)
        ae.mul_(2)
        ac.mul_(2)
        (ue * ue).sum().backward()
        (uc * uc).sum().backward()
        torch.testing.assert_close(pc.grad, pe.grad)
    # where the backward does read it, the error is eager's
    pe, pc = _leaf(5, 2, 3), _leaf(5, 2, 3)
    me, _ = f(pe, ae)
    mc, _ = cf(pc, ac)
    ae.mul_(2)
    ac.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        me.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        mc.backward()


def test_outputs_reaching_disjoint_inputs_are_separate_autograd_nodes():
    # The loss reaches p only; u reaches t only, whose history has no derivative. Backward of the
    # loss must not visit t's history (one node for both outputs would have an edge to it).
    def f(p, t):
        return p.sigmoid().sum(), t * 2

    cf = kiln.compile(f)
    for _ in range(3):
        pe, pc, q = _leaf(7, 8), _leaf(7, 8), _leaf(8, 8)
        le, _ = f(pe, q // q)
        lc, uc = cf(pc, q // q)
        le.backward()
        lc.backward()
        torch.testing.assert_close(pc.grad, pe.grad)
        assert uc.requires_grad and uc.grad_fn is not None
    # both groups used: each node's backward gives its own inputs' gradients
    pe, pc, te, tc = _leaf(7, 8), _leaf(7, 8), _leaf(9, 8), _leaf(9, 8)
    le, ue = f(pe, te)
    lc, uc = cf(pc, tc)
    (le + (ue * ue).sum()).backward()
    (lc + (uc * uc).sum()).backward()
    torch.testing.assert_close(pc.grad, pe.grad)
    torch.testing.assert_close(tc.grad, te.grad)


def test_an_unused_embedding_of_an_index_out_of_range_raises_in_training():
    # The embedding's output is unused: the partitioner left it out of the forward, and the
    # IndexError eager raises went missing.
    emb = torch.nn.Embedding(3, 4)

    def f(idx, p):
        emb(idx)
        return (p * p).sum()

    cf = kiln.compile(f)
    for bad in (False, True, False, True):
        idx = torch.tensor([5 if bad else 1])
        p = _leaf(10, 4)
        if bad:
            with pytest.raises(IndexError):
                f(idx, p)
            with pytest.raises(IndexError):
                cf(idx, p)
        else:
            cf(idx, p).backward()
            torch.testing.assert_close(p.grad, 2 * p.detach())


def test_an_unused_std_over_one_element_leaves_the_used_gradient_finite():
    # std over a dimension of size 1 is NaN; its backward guards 0 / std with masked_fill(.., 0)
    # and then multiplies by 1 / (N - 1) = inf. With that output unused, the absent tangent's zero
    # was materialised before the masked fill and went on into the product with inf: the loss's
    # gradient became NaN on every compiled call (fuzz seed 2772, under break-parity ops).
    def f(p):
        t = p.std(0).squeeze() * False
        u = t - t.mean() * -1.5
        loss = (p * 2).sigmoid().sum()
        return loss, t, u

    _unused_nan_output_matches_eager(f, (1, 3))


def _unused_nan_output_matches_eager(f, shape):
    """f(p) returns (loss, unused outputs...) where an unused output is NaN (eager warns): the
    compiled loss and p's gradient equal eager's over three calls, through kiln's backward."""
    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(step, *shape), _leaf(step, *shape)
        with pytest.warns(UserWarning):
            le = f(pe)[0]
        lc = cf(pc)[0]
        le.backward()
        lc.backward()
        torch.testing.assert_close(lc, le)
        torch.testing.assert_close(pc.grad, pe.grad)
        assert lc.grad_fn.name() == "KilnCompiledBackward"


def test_an_unused_clamped_std_leaves_the_used_gradient_finite():
    # The same NaN std, clamped, returned and unused: clamp's backward selects between the
    # gradient and scalar_tensor(0.), a selection no rule on operators calls zero, so the absent
    # tangent became real zeros there and went into std's backward: every gradient of p was NaN
    # (fuzz seed 12467). Eager never runs an autograd node none of whose gradients is defined;
    # the backward's operators now carry their node and the whole formula goes.
    def f(p):
        t = p.std(-2, keepdim=True).clone()
        t.clamp_(-0.5, 0.5)
        loss = (p - p.detach()).amin(1).sum() + (p * 3).pow(2).mean()
        return loss, t

    _unused_nan_output_matches_eager(f, (1, 6))


def test_an_unused_clamp_gives_no_gradient_where_eager_gives_none():
    # The loss (norm(p=0): its formula returns no gradient) leaves p.grad None in eager. The
    # unused clamp's backward, run on a materialised zero tangent, gave p a zeros gradient (fuzz
    # seed 12918). Its autograd node gets no defined gradient, so it is not run.
    def f(p):
        t = p / 2
        return t.norm(0).sum(), torch.clamp(t, min=0)

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(step, 4, 3), _leaf(step, 4, 3)
        f(pe)[0].backward()
        lc = cf(pc)[0]
        lc.backward()
        assert pe.grad is None and pc.grad is None
        assert lc.grad_fn.name() == "KilnCompiledBackward"


def test_a_view_of_an_input_returned_beside_its_detached_alias_keeps_its_gradient():
    # detach()'s result shares the input's memory but is no view for autograd; the node took it
    # for the base of the other output (a slice of the same input) and made the slice again from
    # it, without history: the loss's gradient never reached p, and SGD left it unchanged (fuzz
    # seed 14965, where a graph break ends the graph at requires_grad_()).
    def f(p):
        return p[1:], p.detach().requires_grad_()

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(step, 4), _leaf(step, 4)
        (se, _), (sc, _) = f(pe), cf(pc)
        assert sc._base is pc and sc.grad_fn is not None
        (se * 3).sum().backward()
        (sc * 3).sum().backward()
        torch.testing.assert_close(pc.grad, pe.grad)


def test_a_written_input_saved_for_backward_and_written_again_raises_as_in_eager():
    # fill_ writes a; the Linear saves it (eager saves a itself); after a graph break a is written
    # again, so eager's backward raises. kiln's backward read its own copy of a's new contents, ran
    # and returned a gradient (fuzz seed 14647). The copy is now watched through a's version.
    def f(a, lin):
        a.fill_(3)
        t = lin(a)
        print("a graph break", file=io.StringIO())
        a[0].zero_()
        return t.cos().sum()

    for fn in (f, kiln.compile(f)):
        lin = torch.nn.Linear(4, 1)
        a = torch.randn(8)[::2]
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            fn(a, lin).backward()


def test_an_empty_batch_still_gives_the_parameters_zero_gradients():
    # A Linear over an empty batch returns a view of its own empty result. Every tensor without
    # memory has a null data pointer, so the node took that output for a view of the (empty) input
    # and made it again from the input: backward went around the node and the Linear's parameters
    # kept .grad None, where eager gives zeros (fuzz seed 16884).
    def f(x, lin):
        return lin(x * 2)

    cf = kiln.compile(f)
    for fn in (f, cf):
        lin = torch.nn.Linear(6, 2)
        x = torch.randn(0, 1, 6, requires_grad=True)
        fn(x, lin).sum().backward()
        assert torch.equal(lin.weight.grad, torch.zeros(2, 6)) and torch.equal(lin.bias.grad, torch.zeros(2))
        assert x.grad.shape == (0, 1, 6)


def test_a_view_of_an_input_written_in_place_stays_tied_to_it_across_a_break():
    # a[0] is a view of an input the training graph divides in place; at the break it is handed
    # to the rest of the function, which clamps it in place. The compiled pair returned a fresh
    # tensor there, so the clamp never reached `a` (fuzz seed 2232). Such a graph now runs
    # eagerly, as inference graphs already did.
    def f(p, a):
        t2 = p.tanh()  # noqa: F841  (live at the break: the graph is a training graph)
        a[..., :1].div_(2)
        t = a.detach() * 2
        t = t.view_as(t)
        v = a[0]
        print(end="")
        v.clamp_(-1, 1)
        return (p * 2).sum()

    cf = kiln.compile(f)
    for step in range(5):
        pe, pc = _leaf(step, 2, 2), _leaf(step, 2, 2)
        ae = torch.randn(2, 3, generator=torch.Generator().manual_seed(step)) * 4
        ac = ae.clone()
        f(pe, ae).backward()
        cf(pc, ac).backward()
        torch.testing.assert_close(ac, ae)
        torch.testing.assert_close(pc.grad, pe.grad)


def test_a_training_graph_writing_an_expanded_input_runs_that_call_eagerly():
    # Seed 2343: fill_ on an expanded (stride 0) argument works in eager; the pair's copy of the new
    # contents back into it cannot (PyTorch refuses copy_ into overlapping memory) and raised.
    def f(p, a):
        a.fill_(3)
        return (p * torch.cat([a, a[:0]]).float()).sum()

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(0, 5), _leaf(0, 5)
        ae, ac = torch.tensor([1]).expand(5), torch.tensor([1]).expand(5)
        le, lc = f(pe, ae), cf(pc, ac)
        le.backward()
        lc.backward()
        torch.testing.assert_close(lc, le)
        torch.testing.assert_close(pc.grad, pe.grad)
        assert ac.tolist() == ae.tolist() == [3] * 5


def test_a_strided_input_written_in_place_and_saved_for_backward_keeps_its_strides():
    # Seed 3150: the backward reads a written input as it was before the call, from a copy; clone()
    # made the copy of a strided slice contiguous, and the backward, compiled for the slice's
    # strides, refused it ("input 1 differs from the traced one") inside loss.backward().
    def f(a, p):
        t = torch.sub(p, a, alpha=0.5)
        a.add_(a, alpha=2)
        return t.sigmoid().sum() + (p * a).sum()

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(0, ()), _leaf(0, ())
        ae, ac = torch.arange(10.0)[::2], torch.arange(10.0)[::2]
        le, lc = f(ae, pe), cf(ac, pc)
        le.backward()
        lc.backward()
        torch.testing.assert_close(lc, le)
        torch.testing.assert_close(pc.grad, pe.grad)
        torch.testing.assert_close(ac, ae)


def test_an_unused_dropout_still_draws_its_numbers():
    # Seed 7280: the partitioner dropped a dropout whose result nothing read, so the next dropout
    # drew other numbers than eager's (every step of a training graph differed).
    def f(p):
        torch.nn.functional.dropout(p * 2, p=0.1, training=True)
        return torch.nn.functional.dropout(p, p=0.25, training=True).tanh().sum()

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(step, 50), _leaf(step, 50)
        torch.manual_seed(step)
        le = f(pe)
        torch.manual_seed(step)
        lc = cf(pc)
        le.backward()
        lc.backward()
        torch.testing.assert_close(lc, le)
        torch.testing.assert_close(pc.grad, pe.grad)


def test_an_output_that_reaches_no_gradient_still_requires_grad():
    # Seed 6691: norm(p=0)'s formula gives no gradient, so no input of the pair got one and the
    # call made no autograd node: the loss did not require grad and loss.backward() raised where
    # eager's runs (and leaves p.grad None).
    def f(p):
        t = p.norm(0).flatten().sin()
        t.pow_(2)
        return torch.nn.functional.mse_loss(t, torch.zeros_like(t))

    cf = kiln.compile(f)
    for step in range(3):
        pe, pc = _leaf(step, 3, 3, dtype=torch.float64), _leaf(step, 3, 3, dtype=torch.float64)
        le, lc = f(pe), cf(pc)
        assert lc.requires_grad == le.requires_grad
        le.backward()
        lc.backward()
        torch.testing.assert_close(lc, le)
        assert pc.grad is None and pe.grad is None


@pytest.mark.parametrize("backend", ["kiln", "aot_eager"])
def test_an_output_returned_beside_its_detached_alias_keeps_its_gradient(backend):
    # p @ w for a vector p is a view (squeeze) of the node's own product; returned beside its
    # detach() (where a graph break ends the graph), it was made again as a view of the detached
    # alias: no history, and p's gradient was None where eager's is w's row sums (seed 21261).
    def f(p, w):
        t = p @ w
        t2 = t.detach().requires_grad_() * 2
        return t.sum() * 3, t2

    cf = kiln.compile(f, backend=backend)
    for step in range(3):
        pe, pc = _leaf(step, 2), _leaf(step, 2)
        w = torch.randn(2, 3)
        f(pe, w)[0].backward()
        cf(pc, w)[0].backward()
        torch.testing.assert_close(pc.grad, pe.grad)


@pytest.mark.parametrize("backend", ["kiln", "aot_eager"])
def test_a_zero_gradient_a_formula_makes_is_a_gradient_not_none(backend):
    # copysign's backward gives its sign operand zeros_like(other): a defined gradient, so eager
    # runs the nodes above it and x.grad is a tensor of zeros. With the graph's other output
    # (x * 2) unused by the loss, the absent-tangent pass saw x's gradient read only the absent
    # tangent and a value no defined gradient reached, and left x.grad None (fuzz seed 3120).
    def f(x, y):
        t = x * 2
        return torch.copysign(y, t).sum(), t

    def g(x, lin, y):
        t = lin(x)
        return torch.copysign(y, torch.maximum(t, x.bool().long())).sum(), t

    lin_e, lin_c = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    lin_c.load_state_dict(lin_e.state_dict())
    cf, cg = kiln.compile(f, backend=backend), kiln.compile(g, backend=backend)
    for step in range(3):  # the first call traces; later calls run the compiled pair
        xe, ye, xc, yc = _leaf(0, 2, 5, 3), _leaf(1, 2, 1, 3), _leaf(0, 2, 5, 3), _leaf(1, 2, 1, 3)
        f(xe, ye)[0].backward()
        cf(xc, yc)[0].backward()
        assert xc.grad is not None and torch.equal(xc.grad, xe.grad), step
        assert torch.equal(yc.grad, ye.grad)
        lin_e.zero_grad(), lin_c.zero_grad()
        xe, ye, xc, yc = _leaf(0, 2, 5, 3), _leaf(1, 2, 1, 3), _leaf(0, 2, 5, 3), _leaf(1, 2, 1, 3)
        g(xe, lin_e, ye)[0].backward()
        cg(xc, lin_c, yc)[0].backward()
        assert xc.grad is not None and torch.equal(xc.grad, xe.grad), step
        assert lin_c.weight.grad is not None and torch.equal(lin_c.weight.grad, lin_e.weight.grad), step
