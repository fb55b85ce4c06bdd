"""Hand-written functions for the decompiler tests, each with inputs (CASES: name -> arg tuples).

Kept free of kiln/torch imports so tools/gen_decompiler_fixtures.py can record their 3.12
bytecode with a 3.12 interpreter."""
import math

G = 10
CASES = {}


def case(*inputs):
    def deco(f):
        CASES[f.__name__] = (f, list(inputs))
        return f
    return deco


@case((1, 2), (3, 4))
def add(a, b): return a + b
@case((5,), (-3,))
def arith(x): return (x * 2 - 3) // 2 % 7 + x ** 2 - (-x) + ~x + (x << 2) + (x >> 1) + (x & 3) + (x | 8) + (x ^ 5)
@case((2.0,), (3.5,))
def floats(x): return x / 3 + math.sqrt(x) - 1e-3 + float('inf') * 0 if x else 0.0
@case((1,), (0,), (-1,))
def if_else(x):
    if x > 0: return "pos"
    elif x < 0: return "neg"
    else: return "zero"
@case((1, 2), (0, 2), (1, 0), (0, 0))
def and_or_cond(a, b):
    if a and b: return 1
    if a or b: return 2
    if not a and not b: return 3
@case((1, 2, 3), (0, 2, 0), (0, 0, 1))
def mixed_cond(a, b, c):
    r = []
    if (a or b) and c: r.append(1)
    if a and b or c: r.append(2)
    if not (a and (b or c)): r.append(3)
    return r
@case((1, 2, 3), (0, 2, 0), (0, 0, 1), ("", "x", None))
def value_boolops(a, b, c):
    x = a and b or c
    y = a or b and c
    z = (a or b) and c
    w = a and b and c
    return x, y, z, w, not a
@case((1, 2), (3, 0))
def ternary(a, b): return a if b else -a
@case((1, 2, 3), (0, 0, 0))
def nested_ternary(a, b, c): return (a if b else c) if a else (b if c else a + 1)
@case((5,), (0,))
def while_loop(n):
    s = 0
    while n > 0:
        s += n
        n -= 1
    return s
@case((10,), (3,))
def while_break_continue(n):
    s = 0
    i = 0
    while i < n:
        i += 1
        if i % 2: continue
        if i > 6: break
        s += i
    else:
        s = -s
    return s
@case((5,),)
def while_true(n):
    i = 0
    while True:
        i += 1
        if i >= n: break
    return i
@case(([1, 2, 3],), ([],))
def for_loop(xs):
    t = 0
    for x in xs: t += x
    return t
@case(([1, 2, 3, 4],), ([1, 3],))
def for_else(xs):
    for x in xs:
        if x % 2 == 0:
            found = x
            break
    else:
        found = None
    return found
@case(([1, -2, 3, 0, 5],),)
def for_continue(xs):
    out = []
    for x in xs:
        if x < 0: continue
        if x == 0: break
        out.append(x)
    return out
@case(([[1, 2], [3, 4]],),)
def nested_loops(m):
    s = 0
    for row in m:
        for v in row:
            if v == 3: break
            s += v
    return s
@case(({"a": 1, "b": 2},),)
def for_unpack(d):
    r = []
    for k, v in sorted(d.items()): r.append(k * v)
    for i, (k, v) in enumerate(sorted(d.items())): r.append(i)
    return r
@case(((1, 2, 3),), ((1, 2, 3, 4, 5),))
def unpacking(t):
    a, *b, c = t
    x, (y, z) = 1, (2, 3)
    return a, b, c, x, y, z
@case((3,),)
def swap(n):
    a, b = 1, n
    a, b = b, a
    return a, b
@case(([1, 2, 3, 4],),)
def listcomp(xs): return [x * 2 for x in xs if x % 2]
@case(([1, 2, 3, 4],),)
def setcomp(xs): return {x % 3 for x in xs}
@case(([1, 2, 3],),)
def dictcomp(xs): return {x: x * x for x in xs if x > 1}
@case(([1, 2, 3],),)
def genexp(xs): return sum(x for x in xs if x != 2)
@case(([[1, 2], [3]],),)
def nested_comp(m): return [v for row in m for v in row if v > 1], [[v * 2 for v in row] for row in m]
@case((3,),)
def comp_closure(n): return [x + n for x in range(n)]
@case((2,),)
def lambdas(k):
    f = lambda x, y=2: x * y + k
    g = lambda *a, **kw: (a, sorted(kw))
    return f(3), f(3, 4), g(1, b=2), sorted([3, 1, 2], key=lambda v: -v)
@case((2,),)
def nested_def(k):
    def inner(x, *, scale=3):
        return x * scale + k
    return inner(1), inner(2, scale=k)
@case((5,),)
def closure_nonlocal(n):
    count = 0
    def bump(by=1):
        nonlocal count
        count += by
        return count
    for _ in range(n): bump()
    return count, bump(10)
@case((1,),)
def global_use(x):
    global G
    old = G
    G = G + x
    r = G
    G = old
    return r
@case(("ab", 3.14159),)
def fstrings(s, x): return f"{s}-{x:.2f}-{s!r}-{x:>{10}}-{len(s) + 1}{{}}"
@case((1, 2),)
def call_kw(a, b):
    def f(*args, **kw): return args, sorted(kw.items())
    t = (3, 4)
    d = {"z": 5}
    return f(a, b, c=1), f(*t), f(a, *t, b), f(**d), f(a, *t, k=2, **d), f(*t, **d)
@case(([3, 1, 2],),)
def method_calls(xs):
    ys = list(xs)
    ys.sort(reverse=True)
    return ys, "-".join(str(x) for x in ys), xs.index(2)
@case((1,), (0,))
def try_except(x):
    try:
        r = 10 // x
    except ZeroDivisionError:
        r = -1
    return r
@case((1,), (0,), ("a",))
def try_multi(x):
    try:
        r = 10 // x
    except ZeroDivisionError as e:
        r = str(e)
    except (TypeError, ValueError):
        r = "type"
    else:
        r = r + 1
    finally:
        x = 5
    return r, x
@case((1,), (0,))
def try_finally_return(x):
    log = []
    try:
        if x: return 1
        log.append("body")
    finally:
        log.append("fin")
    return log
@case((0,), (1,))
def try_raise(x):
    try:
        if x: raise KeyError("k")
        return "ok"
    except KeyError as e:
        return "caught " + str(e)
@case((0,), (1,))
def reraise(x):
    try:
        try:
            if x: raise ValueError(x)
        except ValueError:
            raise
    except Exception as e:
        return type(e).__name__
    return None
@case((1,), (-1,))
def raises(x):
    if x < 0: raise ValueError("negative")
    return x
@case((1,), (-1,))
def asserts(x):
    assert x > 0, "must be positive"
    assert x
    return x
@case(("/tmp",),)
def with_stmt(p):
    import contextlib
    out = []
    @contextlib.contextmanager
    def cm(tag):
        out.append("enter " + tag)
        yield tag.upper()
        out.append("exit " + tag)
    with cm("a") as a, cm("b"):
        out.append(a)
    with cm("c"):
        out.append("body")
    return out
@case((3,),)
def generator(n):
    def gen(k):
        for i in range(k):
            x = yield i
            if x: return
        yield from range(2)
    return list(gen(n))
@case(([1, 2, 3],),)
def augassign(xs):
    import types
    o = types.SimpleNamespace()
    o.v = 1
    o.v += 2
    xs[0] += 5
    xs[1:2] = [9]
    d = {"k": 1}
    d["k"] *= 3
    n = 2
    n **= 3
    n //= 3
    n <<= 1
    return xs, o.v, d, n
@case(([1, 2, 3, 4, 5],),)
def slicing(xs): return xs[1:3], xs[::2], xs[-1], xs[:-1], xs[::-1], xs[1:], xs[:2]
@case(({"a": 1},),)
def dicts(d):
    e = {"x": 1, **d, "y": 2}
    f = dict(d, z=3)
    del e["x"]
    return e, f, {}, {1: 2}, {**d}
@case(([1],),)
def displays(xs): return [1, 2, *xs, 3], (1, *xs), {1, *xs}, (), [], (5,), [[]], {1, 2}
@case((1, 2),)
def compares(a, b): return a < b, a <= b, a == b, a != b, a > b, a >= b, a is b, a is not b, a in [b], a not in [b]
@case((None,), (1,))
def is_none(x):
    if x is None: return "none"
    if x is not None: return "some"
@case((4,),)
def del_stmt(n):
    x = n
    del x
    l = [1, 2, 3]
    del l[0]
    return l
@case((2,),)
def import_in_func(n):
    import os.path
    from math import sqrt as s, floor
    import math as m
    return os.path.join("a", "b"), s(n * 2.0), floor(2.5), m.pi > 3
@case((3,),)
def walrus(n):
    if (m := n * 2) > 4: return m
    return -m
@case((1, 2),)
def chained_assign(a, b):
    x = y = a + b
    p = q = [1]
    p.append(2)
    return x, y, q
@case((3,),)
def while_else(n):
    while n:
        n -= 1
        if n == 10: break
    else:
        return "done"
    return "broke"
@case(([5, 3, 8],),)
def builtin_calls(xs): return len(xs), max(xs), min(xs, key=lambda v: -v), sorted(xs), list(reversed(xs)), any(x > 7 for x in xs), all(xs)
@case((2,),)
def star_args_def(n):
    def f(a, b=2, *args, c, d=4, **kw): return a, b, args, c, d, sorted(kw)
    return f(1, c=3), f(1, 2, 3, 4, c=5, e=6)
@case((1, 2),)
def posonly(a, b):
    def f(x, y, /, z=0): return x + y + z
    return f(a, b), f(a, b, z=1)
@case((5,),)
def string_ops(n): return "abc" * n, "x%sy" % n, "{}-{}".format(n, n), 'q"uote', "new\nline", b"bytes"
@case((0,), (3,))
def early_return_loop(n):
    for i in range(n):
        if i == 1: return i
    return -1
@case(([1, 2, 3],),)
def return_in_with(xs):
    import contextlib
    with contextlib.suppress(ValueError):
        return len(xs)
@case((1,), (2,))
def elif_chain(x):
    if x == 1: y = "one"
    elif x == 2: y = "two"
    elif x == 3: y = "three"
    else: y = "many"
    return y
@case((3,),)
def nested_if_in_loop(n):
    r = []
    for i in range(n):
        if i == 0: r.append("a")
        elif i == 1:
            if n > 2: r.append("b")
            else: r.append("c")
        else: r.append("d")
    return r
@case((2,),)
def loop_in_try(n):
    out = []
    try:
        for i in range(n):
            out.append(10 // (1 - i))
    except ZeroDivisionError:
        out.append("z")
    return out
@case((2,),)
def try_in_loop(n):
    out = []
    for i in range(n + 2):
        try:
            out.append(10 // (1 - i))
        except ZeroDivisionError:
            continue
        finally:
            out.append("f")
    return out
@case((4,),)
def break_in_try_finally(n):
    out = []
    for i in range(n):
        try:
            if i == 2: break
            out.append(i)
        finally:
            out.append("f")
    return out
@case((1.5,),)
def attr_on_literal(x): return (1).bit_length(), 2.5.is_integer(), "a".upper(), x.hex()[:4]
@case((2,),)
def unary_minus_power(n): return -n ** 2, (-n) ** 2, n ** -1, 2 ** 3 ** 2, -(n + 1)
@case(([3, 1],),)
def sort_key(xs): return sorted(xs, key=lambda x: (x % 2, -x))
@case((6,),)
def tuple_return(n): return n, n + 1
@case((1, 2, 3),)
def precedence(a, b, c): return (a + b) * c, a + b * c, (a - b) - c, a - (b - c), a / (b * c), (a, b), [a, (b, c)], not (a == b), (a if b else c) + 1, -(-a)
@case((2,),)
def nested_functions_deep(n):
    def outer(a):
        def inner(b):
            return a + b + n
        return inner
    return outer(1)(2)
@case((3,),)
def decorator_use(n):
    import functools
    @functools.lru_cache(maxsize=None)
    def fib(k): return k if k < 2 else fib(k - 1) + fib(k - 2)
    return fib(n + 5)
@case((2,),)
def yield_expression(n):
    def g():
        total = 0
        while True:
            v = yield total
            if v is None: return
            total += v
    it = g()
    next(it)
    return it.send(n), it.send(3)
@case(([1, 2],),)
def del_attr_and_global_name(xs):
    import types
    c = types.SimpleNamespace()
    c.a = 1
    del c.a
    return hasattr(c, "a"), len(xs)
@case((3,),)
def loop_with_else_and_return(n):
    for i in range(n):
        if i > 5: return "big"
    else:
        return "small"
@case(("a b  c",),)
def str_methods(s): return s.split(), s.replace(" ", "_"), s.strip().title(), [w for w in s.split(" ") if w]
@case((1, 0), (0, 1), (1, 1))
def not_conditions(a, b):
    if not a: return "na"
    if not (a and b): return "nab"
    return "ok"
@case((0,), (5,))
def while_cond_and(n):
    i = 0
    while i < n and i != 3:
        i += 1
    return i
@case(([1, 2, 3],),)
def enumerate_zip(xs): return [(i, a, b) for i, (a, b) in enumerate(zip(xs, xs[1:]))]
@case((2,),)
def conditional_import_like(n):
    try:
        import json
    except ImportError:
        json = None
    return json.dumps([n])
@case((3,),)
def dict_iteration(n):
    d = {i: str(i) for i in range(n)}
    out = []
    for k in d:
        if k == 1: continue
        out.append(d[k])
    return out, list(d.values()), list(d.keys())
@case((1,), (None,))
def ternary_in_call(x): return str(x if x is not None else "none"), [x] if x else []
@case((4,),)
def matrix_ops(n): return [[i * j for j in range(n)] for i in range(n)]
@case(("key",),)
def try_except_else_finally_all(k):
    log = []
    try:
        v = {"key": 1}[k]
    except KeyError:
        log.append("miss")
    else:
        log.append(v)
    finally:
        log.append("end")
    return log
@case((2,),)
def kwonly_defaults(n):
    def f(*, a=1, b): return a + b
    return f(b=n), f(a=n, b=n)
@case((5,),)
def complex_const(n): return 1j * n, (1 + 2j), -0.0, 1e100, float("nan") != float("nan")
@case(([3, 4],),)
def set_ops(xs): return {1, 2} | set(xs), frozenset(xs) & {3}, 3 in {3, 4}, 5 not in (1, 2)
@case((3,),)
def generator_expression_closure(n): return tuple(x * n for x in range(n))


# ---- chained comparisons -----------------------------------------------------------------------
@case((1, 2, 3), (3, 2, 1), (1, 1, 2), (0, 5, 5))
def chain_if(a, b, c):
    if a < b < c:
        return "up"
    elif a > b > c:
        return "down"
    elif not a <= b <= c:
        return "not"
    return "flat"
@case((1, 2, 3), (3, 2, 1), (2, 2, 2))
def chain_values(a, b, c):
    x = a < b <= c
    y = a == b == c != 0
    z = [v for v in (a, b, c) if 0 < v < 3]
    return x, y, z, 0 < a < 10 and b, a is not None is not b
@case((1, 2, 3, 0), (3, 2, 1, 1), (1, 1, 1, 0))
def chain_or_and(a, b, c, d):
    r = []
    if a < b < c or d:
        r.append(1)
    if d and a <= b < c + 1:
        r.append(2)
    if a in (1, 2) in [(1, 2)]:
        r.append(3)
    return r
@case((0, 5),)
def chain_while(i, n):
    s = 0
    while 0 <= i < n:
        s += i
        i += 1
    return s
@case((2, [1, 2, 3]), (7, [1, 2]))
def chain_calls(x, xs):
    def f(v):
        return v * 2
    return f(1) < f(x) < f(len(xs)) + 10, min(xs) <= x <= max(xs)


# ---- tuple and chained assignments ---------------------------------------------------------------
@case(([1, 2, 3],),)
def tuple_assign_order(xs):
    first, last = xs[0], xs[-1]
    a = b = c = len(xs)
    class Box:
        pass
    o = Box()
    o.p = o.q = [first]
    d = {}
    d["k"] = o.r = last
    return first, last, a, b, c, o.p is o.q, d, o.r


# ---- class statements ------------------------------------------------------------------------------
class _Base:
    def hello(self):
        return "base"
@case((3,), (0,))
def class_statement(n):
    class Point(_Base):
        "A point."
        dims: int = 2
        label: str
        def __init__(self, x, y=0):
            self.x = x
            self.__y = y
        def hello(self):
            return "point " + super().hello()
        @property
        def norm(self):
            return abs(self.x) + abs(self.__y)
        @staticmethod
        def origin():
            return Point(0)
        def __repr__(self):
            return f"Point({self.x}, {self.__y})"
    p = Point(n, 2)
    return repr(p), p.norm, p.hello(), Point.dims, Point.__doc__, repr(Point.origin()), Point.__annotations__
@case((1,),)
def class_keywords(n):
    class Meta(type):
        def __new__(mcs, name, bases, ns, flag=0):
            ns["flag"] = flag
            return super().__new__(mcs, name, bases, ns)
    class K(object, metaclass=Meta, flag=n):
        pass
    return K.flag, type(K).__name__


# ---- annotations -----------------------------------------------------------------------------------
@case((2,),)
def annotated(n):
    def f(a: int, b: "str" = "x", *args: float, c: list = None, **kw: dict) -> tuple:
        return a, b
    return f(n), f.__annotations__


# ---- async functions ---------------------------------------------------------------------------------
@case((3,), (0,))
def async_constructs(n):
    import asyncio

    async def agen(k):
        for i in range(k):
            yield i
            await asyncio.sleep(0)

    class CM:
        def __init__(self):
            self.log = []
        async def __aenter__(self):
            self.log.append("enter")
            return 10
        async def __aexit__(self, *exc):
            self.log.append("exit")
            return False

    async def main(k):
        total = 0
        async for v in agen(k):
            if v == 1:
                continue
            if v > 5:
                break
            total += v
        else:
            total += 100
        cm = CM()
        async with cm as c:
            total += c
        async with CM() as a, CM() as b:
            total += a + b
        return total + await asyncio.sleep(0, 5), cm.log

    return asyncio.run(main(n))


# ---- 3.12 layouts ------------------------------------------------------------------------------------
@case((1.5,), (2,))
def lambda_conditional(x):
    f = lambda t: float(t) if isinstance(t, int) else -t
    g = lambda t, u=2: t if t > u else (u if u > 0 else None)
    return f(x), g(x)
@case(([3, 1],), ([],))
def try_in_loop_reraise(xs):
    xs = list(xs)
    out = []
    while xs:
        v = xs.pop()
        try:
            out.append(10 // v)
        except ZeroDivisionError:
            out.append("zero")
            raise
    return out
@case(([1, 0, 2],),)
def try_except_continue_312(xs):
    d = {1: "a", 2: "b"}
    out = []
    for x in xs:
        try:
            out.append(d[x])
        except KeyError:
            continue
        out.append(x)
    return out
@case(("abc",), ("",))
def try_all_clauses_raise(s):
    it = iter(s)
    if s:
        try:
            v = next(it)
        except StopIteration:
            raise ValueError("empty") from None
    else:
        v = None
    return v, list(it)


# ---- match statements -------------------------------------------------------------------------------
class _Pt:
    __match_args__ = ("x", "y")
    def __init__(self, x, y):
        self.x, self.y = x, y
@case((0,), (None,), ([4, 5],), (_Pt(5, 1),), (_Pt(1, 1),), ("s",), (7.5,))
def match_basic(v):
    r = "none"
    match v:
        case 0:
            r = "zero"
        case None:
            r = "None"
        case [a, _]:
            r = ("pair", a)
        case _Pt(px, y=py) if px > 3 and py:
            r = ("pt", px, py)
        case str():
            r = "str"
    return r
@case((True,), (3,), ([1],), ("x",))
def match_capture_last(v):
    match v:
        case True:
            return "true"
        case 3:
            return "three"
        case [x]:
            return x
        case other:
            return ("other", other)
@case((1,), (2,))
def match_wildcard_last(v):
    out = []
    match v * 2:
        case 2:
            out.append("two")
        case _:
            out.append("else")
    return out
@case(([1, 2, 3],),)
def tuple_assign_items(xs):
    xs = list(xs)
    calls = []
    def f(v):
        calls.append(v)
        return v
    class O:
        pass
    o = O()
    xs[0], xs[2] = xs[2], xs[0]
    o.a, o.b = f(1), f(2)
    o.c, xs[1], n = f(3), f(4), f(5)
    return xs, o.a, o.b, o.c, n, calls
@case(([1, 2, 3],), ([],), ([0, 5],))
def walrus_in_conditions(xs):
    out = []
    if xs and (first := xs[0]) and first > 0:
        out.append(first)
    if (n := len(xs)) > 1:
        out.append(n)
    ys = [y for x in xs if (y := x * 2) > 2]
    return out, ys, [(z := v) + z for v in xs]
@case((True, 1), (False, 0), (True, 0))
def finally_with_branches(flag, d):
    log = []
    def inner():
        try:
            log.append(10 // d)
        finally:
            if flag:
                log.append("flag")
    try:
        inner()
    except ZeroDivisionError:
        log.append("zde")
    for k in range(2):
        try:
            log.append(k)
        finally:
            if flag:
                log.append("f")
            else:
                log.append("nf")
    return log
# An if whose then-branch never falls through (raise, return, continue) has no jump over its else;
# the inner if's end is threaded past the else block (3.11 and 3.12).
@case(("a", None), ("a", 1), ("b", None), ("b", 1))
def else_after_raising_then(mode, ac):
    if mode in ("a", "c"):
        if ac is not None:
            raise ValueError("x")
    else:
        if ac is None:
            ac = False
    return mode, ac
@case((1, 1), (1, 0), (0, 1), (0, 0))
def else_after_returning_then(a, b):
    r = 0
    if a:
        if b:
            return "ab"
    else:
        r = 5
    return r
@case(([1, 2, 3, 0, 5],), ([],))
def else_after_continue_then(xs):
    out = []
    for x in xs:
        if x > 1:
            if x == 3:
                out.append("three")
            continue
        else:
            out.append(x)
        out.append(-x)
    return out
@case((None,), (1.0,), (float("inf"),))
def assert_in_then_before_else(t):
    if t is not None:
        total = t
        assert not math.isinf(total), "inf"
    else:
        total = 0
    return total


# The rest of the cases (registered into CASES as that module is imported).
import decompiler_cases_flow  # noqa: E402,F401
import decompiler_cases_layouts  # noqa: E402,F401
