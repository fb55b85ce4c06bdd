"""try/except/finally on the symbolic path: where kiln knows Python raises (a missing dict key, an
index past a list's end, a missing attribute of an object made here, `raise`, a builtin folded on
constants that raises), the handler the exception table names runs inside the capture, so the
function stays one graph. Where the exception leaves the function, or the exception object
would leave the graph, the frame splits / runs eagerly and the user sees eager's exception."""
import pytest
import torch

import kiln
from conftest import check


def x4():
    return [torch.randn(4)]


class Stop(Exception):
    pass


class Loud(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.extra = msg * 2


def _raise_if(flag):
    if flag:
        raise Stop
    return 3


def test_missing_dict_key():
    def f(x):
        d = {"a": x}
        try:
            y = d["b"]
        except KeyError as e:
            y = x * len(str(e))  # "'b'"
        return y + d["a"]

    check(f, x4)


def test_index_error_message_is_pythons():
    def f(x):
        xs, ts = [x], (x,)
        try:
            return xs[3]
        except IndexError as e:
            n = len(str(e))
        try:
            return ts[-5]
        except IndexError as e:
            return x * n + len(str(e))

    check(f, x4)


def test_raise_in_an_inlined_function_caught_by_the_caller():
    def f(x):
        try:
            k = _raise_if(x.shape[0] == 4)
        except Stop:
            k = 5
        return x * k

    check(f, x4)


def test_finally_runs_on_both_paths_and_the_exception_continues():
    def f(x):
        out = []
        for bad in (False, True):
            try:
                try:
                    if bad:
                        raise ValueError("bad")
                    out.append(0)
                finally:
                    out.append(1)
            except ValueError as e:
                out.append(str(e))
        return x * len(out), out

    check(f, x4)


def test_exception_inside_no_grad_restores_grad_mode():
    def f(x):
        try:
            with torch.no_grad():
                y = x * 2
                raise KeyError("k")
        except KeyError:
            y = y + int(torch.is_grad_enabled())
        return y

    check(f, x4)


def test_reraise_and_raise_from():
    def f(x):
        try:
            try:
                raise KeyError("a")
            except KeyError as e:
                raise ValueError("b") from e
        except ValueError as e2:
            assert isinstance(e2.__cause__, KeyError)
            try:
                try:
                    raise Stop("again")
                except Stop:
                    raise
            except Stop as e3:
                return x * (len(e3.args) + 1)

    check(f, x4)


def test_a_builtin_that_raises_on_constants():
    def f(x):
        try:
            n = int("abc")
        except ValueError:
            n = 7
        return x * n

    check(f, x4)


def test_missing_attribute_of_an_object_made_here():
    class Box:
        def __init__(self):
            self.a = 1

    def f(x):
        b = Box()
        try:
            v = b.missing
        except AttributeError as e:
            v = len(str(e))
        return x * v

    check(f, x4)


def test_an_uncaught_exception_is_eagers():
    def f(x):
        d = {}
        return d["zz"] + x

    c = kiln.compile(f)
    with pytest.raises(KeyError, match="zz"):
        c(torch.randn(4))


def test_an_exception_object_never_leaves_the_graph():
    def f(x):
        try:
            raise ValueError("v")
        except ValueError as e:
            return x + 1, e

    c = kiln.compile(f)
    a, e1 = c(torch.randn(4))
    b, e2 = c(torch.randn(4))
    assert isinstance(e1, ValueError) and e1 is not e2  # a new exception each call, as in eager


def test_an_exception_class_with_its_own_init_is_not_made_at_capture_time():
    def f(x):
        try:
            raise Loud("m")
        except Loud as e:
            return x * len(e.extra)

    check(f, x4, graphs=None, breaks=None)


def test_the_guarded_facts_decide_the_path_on_later_calls():
    def f(x, d):
        try:
            return x * d["k"]
        except KeyError:
            return x - 1

    c = kiln.compile(f)
    x = torch.randn(4)
    torch.testing.assert_close(c(x, {"j": 2}), x - 1)
    torch.testing.assert_close(c(x, {"k": 3}), x * 3)  # the dict's keys are guarded: recaptured
    torch.testing.assert_close(c(x, {"j": 2}), x - 1)


def test_a_handler_never_sees_an_error_of_kilns_own_model():
    # kiln runs an inlined generator to completion, where every `yield` is None: the value of a
    # yield fed by send() would be None there and `total + v` a TypeError eager never raises.
    def f(x):
        def acc():
            total = 0
            while True:
                v = yield total
                total = total + v

        g = acc()
        next(g)
        try:
            g.send(1)
            r = g.send(2)
        except TypeError:
            r = -1
        return x * r

    c = kiln.compile(f)
    x = torch.randn(4)
    torch.testing.assert_close(c(x), x * 3)
