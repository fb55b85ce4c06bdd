"""torch.distributions objects made inside the function: their lazy properties (probs from
logits, logits from probs) are non-data descriptors written in Python, inlined. (With validate_args, the
sample check branches on a tensor's value: a break, not what these tests are about.)"""
import torch

from conftest import check


def test_categorical_lazy_probs():
    def fn(x):
        d = torch.distributions.Categorical(logits=x, validate_args=False)
        return d.log_prob(torch.tensor([0, 1, 2, 3])), d.entropy(), d.probs
    check(fn, lambda: (torch.randn(4, 8),))


def test_bernoulli_lazy_logits():
    def fn(x):
        d = torch.distributions.Bernoulli(probs=x / 2, validate_args=False)
        return d.log_prob(torch.ones(4, 8)), d.variance, d.logits
    check(fn, lambda: (torch.rand(4, 8),))


class _Lazy:
    def __init__(self, f):
        self.f = f

    def __get__(self, inst, owner):
        if inst is None:
            return self
        v = self.f(inst)
        setattr(inst, self.f.__name__, v)
        return v


class _Box:
    def __init__(self, t):
        self.t = t

    @_Lazy
    def doubled(self):
        return self.t * 2


def test_user_non_data_descriptor_on_a_new_object():
    def fn(x):
        b = _Box(x)
        return b.doubled + b.doubled
    check(fn, lambda: (torch.randn(3),))
