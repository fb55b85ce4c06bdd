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
# `not a or b` as a value: 3.12 tests the negation with COPY 1; POP_JUMP_IF_TRUE.
@case((0, 5), (1, 0), (1, 7), (0, 0))
def not_or_value(a, b):
    x = not a or b
    return x, not a or not b and a, (not a) and b
# 3.12 copies a conditional expression's tail (the call and the return or raise) into both branches.
@case((1, 0, "x"), (1, 1, "y"), (2, 0, "z"))
def ternary_in_copied_tails(given, kw, name):
    if name == "z":
        raise ValueError("%s %s" % (name, "was" if given == 1 and not kw else "were"))
    return str.upper(name if given == 1 or kw else "other"), [given, kw if kw else None]
# `if not (a < b < c): raise`: 3.12 gives the chain's cleanup its own copy of the raise.
@case((0.5, 0.5), (0.5, 2), (2, 0.5), (0, 0))
def chain_negated_raise(r, s):
    if not (0 < r < 1):
        return "first"
    if not (0 < r < 1 and 0 < s < 1):
        raise ValueError("both")
    if 0 < s < 1 and r:
        return "and"
    return "end"
# A try/finally body ending in `return <constant>`: a NOP marks the return's line before the
# finally copy (it was refused as a finally block without its normal-exit copy).
@case((True,), (False,))
def try_finally_return_const(ok):
    log = []
    try:
        if not ok:
            log.append("not ok")
        log.append(len(log))
        return True
    finally:
        log.append("finally")
# try/finally inside try/finally, the value returned after both (3.12 reads a local with
# LOAD_FAST_CHECK in the handler's copy of the finally block and LOAD_FAST in the normal one;
# the outer copy used to be printed inside the try body as well as in its finally).
@case((1,), (0,))
def nested_try_finally_return_after(d):
    log = []
    try:
        save = d
        try:
            x = 10 // d
        finally:
            log.append("inner")
        try:
            y = x + 1
        finally:
            log.append("inner2")
    finally:
        log.append(save)
    return (x, y, log)
# A break out of a for loop inside an except clause pops the loop's iterator: it was printed as the
# clause falling off the try (wrong source: the break disappeared).
@case(([1, 2, 3],), ([0, 5],), ([],))
def break_in_except_clause(xs):
    out = []
    for x in xs:
        for k in range(3):
            try:
                out.append(10 // (x - k))
                if x > 2:
                    return out
            except ZeroDivisionError:
                if k:
                    continue
                break
            except ValueError:
                break
    return out
# Async comprehensions (3.11: a coroutine code object awaited by its caller, iterating the
# GET_AITER its caller made; 3.12: inlined). Driven to completion without an event loop.
@case(([1, 2, 3],), ([],), ([0, 4],))
def async_comprehensions(xs):
    async def agen():
        for x in xs:
            yield x
    async def value(v):
        return v * 10
    async def body():
        a = [x async for x in agen()]
        b = {x: await value(x) async for x in agen() if x}
        c = [await value(x) for x in xs]
        d = {k async for k in (x * 2 async for x in agen())}
        e = [x + y async for x in agen() for y in xs if x]
        return a, b, c, sorted(d), e
    co = body()
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine awaited something that suspends")
# An async for nested in a comprehension's (sync) loop: 3.11 printed it as a plain `for` (wrong source).
@case(([1, 2, 3],), ([],))
def async_for_inside_comprehension(xs):
    async def agen():
        for x in xs:
            yield x
    async def body():
        return [x - y for x in xs async for y in agen()]
    co = body()
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine awaited something that suspends")
# Or-patterns of values (each alternative tests a copy of the subject), with a guard, and a
# wildcard after a case that needs no copy of the subject (its line marked by a NOP).
@case((1,), (2,), ("a",), ("b",), (3.5,), (None,))
def match_or_patterns(v):
    match v:
        case 1 | 2 if v > 1:
            x = "two"
        case "a" | "b" | None:
            x = "ab"
        case y:
            x = y
    match v:
        case 1 | 2:
            z = "small"
        case _:
            z = "other"
    w = 5
    return x, z, w
# Mapping patterns with constant keys whose values are captures, `_`, constants or None.
@case(({"k": 1, "j": 2},), ({"z": 1},), ({"z": 2},), ({"a": 1, "b": None, 3: "y"},), ([1],), ({},))
def match_mappings(v):
    match v:
        case {"k": x, "j": _}:
            return x
        case {"z": 1}:
            return "z1"
        case {"a": 1, "b": None, 3: y}:
            return y
        case _:
            return None
# A try/finally inside a try/except (3.12 places the code after the outer try before the nested
# handlers, whose cleanup re-raises into the outer handler: the outer body ends before them), a
# tail 3.12 copies into an except clause after its POP_EXCEPT (it runs after the try, with no
# exception being handled), and a try ending in a nested try that returns.
@case((0,), (1,), (2,))
def finally_inside_except(k):
    log = []
    def step():
        if k == 1:
            raise ValueError("v")
        if k == 2:
            raise KeyError("k")
        return "ok"
    try:
        try:
            step()
        finally:
            log.append("finally")
    except ValueError:
        log.append("value")
    log.append("after")
    try:
        step()
    except (ValueError, KeyError):
        log.append("caught")
    log.append(len(log))
    try:
        first = log[0]
        try:
            return first, step(), log
        except KeyError:
            log.append("inner")
            raise
    except Exception:
        if log:
            log.append("outer")
        return log
# Three tries nested (try/finally in try/except in try/except): 3.12 places the middle try's except
# clause exit (POP_EXCEPT; JUMP_BACKWARD), which re-raises into the outer handler, among the handlers.
@case((0,), (1,), (2,))
def three_nested_tries(k):
    log = []
    def step():
        if k == 1:
            raise ValueError("v")
        if k == 2:
            raise KeyError("k")
    try:
        try:
            try:
                step()
            finally:
                log.append("finally")
        except ValueError:
            log.append("value")
        log.append("after")
    except KeyError:
        log.append("key")
    return log
# `import a.b as c` binds the submodule (it was printed as `from a.b import b as c`: wrong source,
# an ImportError), also several levels deep.
@case(("x",), ("y",))
def import_dotted_as(name):
    import os.path as p
    import json.decoder as jd
    import email.mime.text as emt
    from os import path as q, sep
    return p.join(name, "z"), q is p, sep, jd.JSONDecoder.__name__, emt.__name__
# Or-patterns whose bodies return: 3.12 copies the small success path into every alternative.
@case((1,), (2,), ("b",), ("z",), (None,))
def match_or_patterns_returning(v):
    match v:
        case 1 | 2:
            return "small"
        case "a" | "b" | "c":
            return "letter"
        case _:
            return "other"
# A '#' or a backslash in a replacement field's format spec is fine before 3.12 too (only the
# expression part may hold neither): it was refused.
@case((5, "ab"), (255, ""))
def fstring_format_spec_hash_backslash(n, s):
    return f"<{n:#x} {s!r:#>6} {n:\n>4}>"
# An await inside a try/finally whose body returns a constant (3.12 places the await's
# CLEANUP_THROW after the return; it is an exception path, not code after the try).
@case((True,), (False,))
def await_in_try_finally(ok):
    log = []
    async def value():
        if not ok:
            raise ValueError("no")
        return 1
    async def body():
        try:
            log.append(await value())
            return True
        finally:
            log.append("finally")
    co = body()
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value, log
    except ValueError:
        return "raised", log
    raise AssertionError("the coroutine awaited something that suspends")
# A conditional expression argument in a return inside a try (3.12 copies the call and return into
# both branches and leaves the returns out of the try body's range: torch.nn.Module.to's convert).
@case((1.5, None), (2, None), (1.5, 7), ("s", 7))
def ternary_return_in_try(v, fmt):
    def to(a, b, c, memory_format=None):
        return (a, b, c, memory_format)
    try:
        if fmt is not None and v in (1.5, "s"):
            return to(v, "float" if isinstance(v, float) or isinstance(v, complex) else None, 3, memory_format=fmt)
        return to(v, "float" if isinstance(v, float) or isinstance(v, complex) else None, 3)
    except NotImplementedError:
        raise
# A class body that ends in an if/else: 3.11 copies the body's implicit return into the if branch
# and places the else branch after it (tempfile._TemporaryFileCloser was refused: "class body that
# returns before its end").
@case((True,), (False,))
def class_body_ends_in_if_else(flag):
    class C:
        x = 1
        if flag:
            def m(self):
                return "a"
            y = 2
        else:
            def m(self):
                return "b"
    return C().m(), C.x, getattr(C, "y", None)
# A match statement whose only case is a class pattern: the pattern tests the subject itself (no
# COPY 1 before it), so MATCH_CLASS was met as a plain instruction (traceback's
# _extract_caret_anchors_from_line_segment was refused).
@case(("",), ("a",), ("abc",), (3,), ([1],))
def match_single_class_case(v):
    match v:
        case str(s):
            match len(s):
                case 0:
                    return "empty"
                case 1:
                    return "one"
    return "other"
# A try/finally whose body always raises has no normal-exit copy of its finally block (3.12 places
# the code after the enclosing if there instead: contextlib's __exit__ and shutil.rmtree were
# refused: "finally block without its normal-exit copy").
@case((0,), (1,), (2,))
def try_finally_body_raises(v):
    log = []
    if v == 1:
        try:
            raise ValueError(v)
        finally:
            log.append("closed")
    elif v == 2:
        try:
            log.append("body")
            raise KeyError(v)
        finally:
            log.append("closed")
    log.append("after")
    return log
# A `continue` ending a branch of a try body unwinds the try first, so its jump lies past the
# protected range, before the body's normal exit (pathlib's _WildcardSelector._select_from: "a jump
# that is neither break, continue nor the end of a block").
class _Entry:
    def __init__(self, d):
        self.d = d

    def is_dir(self):
        if self.d is None:
            raise OSError("gone")
        return self.d


@case(([_Entry(True), _Entry(False), _Entry(None)], True), ([_Entry(True), _Entry(False)], False))
def try_body_branch_continues(entries, dironly):
    out = []
    for entry in entries:
        if dironly:
            try:
                if not entry.is_dir():
                    continue
            except OSError as e:
                if not e:
                    raise
                continue
        out.append(entry.d)
    return out
# A conditional expression used as a condition: the true branch's tests end in a JUMP_FORWARD over
# the false branch's (pathlib's PurePath.relative_to and dataclasses' _hash_add were refused).
@case((1, 1, 0, 0, 0), (0, 0, 0, 1, 2), (0, 0, 5, 1, 1), (0, 1, 0, 3, 3))
def ternary_as_condition(root, drv, n, a, b):
    r = []
    if (root or drv) if n == 0 else a != b:
        r.append(1)
    if (a if b else n):
        r.append(2)
    r.append([x for x in (root, drv, n, a, b) if (x > 0 if n is None else x)])
    if not (0 < a < 3 and 0 < b < 3):  # (a chain's jump over its cleanup is not such a branch end)
        r.append(3)
    return r
# A %-format of a constant string with %s/%r/%a fields and a tuple of values compiles to the
# f-string instructions; before 3.12 an f-string cannot hold the backslash or '#' of those values'
# expressions, so the %-form is the source (enum's _test_simple_enum was refused).
@case(("n", ["a", "b"], "q"), ("", [], "#"))
def percent_format_with_backslash(name, failed, x):
    a = '%r member mismatch:\n      %s' % (name, '\n      '.join(failed))
    b = '%s' % ('#'.join(failed),)
    c = 'x%%y %a' % (x + '\n',)
    return a, b, c, f"{name!r:>6}"
# A try/except inside a finally block, at the end of the function: 3.12 places the normal exit's
# copy of the inner handler after the returns it copies into that copy's branches, the exceptional
# copy's inline (tempfile._TemporaryFileCloser.cleanup: "finally block without its normal-exit copy").
class _Closer:
    def __init__(self, called, delete, fail):
        self.called, self.delete, self.fail, self.log = called, delete, fail, []

    def unlink(self, name):
        self.log.append(name)
        if self.fail:
            raise FileNotFoundError(name)


@case((False, True, False, False), (False, True, True, True), (True, True, False, False), (False, False, False, True))
def try_except_in_finally_at_end(called, delete, fail, windows):
    c = _Closer(called, delete, fail)
    if not c.called:
        c.called = True
        try:
            if not c.fail:
                c.log.append("close")
        finally:
            if c.delete and not (windows and c.fail):
                try:
                    c.unlink("f")
                except FileNotFoundError:
                    pass
    return c.log
# A with block ending the function around a loop that breaks: 3.12 copies the return into the with
# handler's continuation, so the break jumps to the normal exit's __exit__ call; the handler's jump
# back to after the block is no loop (a `with` inside a loop body was taken for a while loop's header).
class _Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


@case((3,), (0,))
def with_at_end_around_a_loop(n):
    log = []
    with _Ctx(log) as c:
        while True:
            n -= 1
            if n < 0:
                break
            c.log.append(n)
    log.append("after")


# A try around a with block in a loop, with code after the try: 3.12 places that code before the
# with's handler, whose tail re-raises into the try's handler: not the try body
# (configparser.RawConfigParser.read was refused, then its body took in the code after the try).
@case((["a", "bad", 3],), ([],))
def try_around_with_in_a_loop(names):
    read_ok = []
    for name in names:
        try:
            with _Ctx(read_ok):
                if name == "bad":
                    raise OSError(name)
        except OSError:
            continue
        if isinstance(name, str):
            name = name + "x"
        read_ok.append(name)
    return read_ok
# A with block inside a loop's branch that ends in break: 3.12's handler of the inner block jumps
# back to that break (shutil._copyfileobj_readinto: "with block continuing outside its enclosing block").
@case((5, 2), (1, 4), (0, 3))
def with_then_break_in_a_loop(n, length):
    log = []
    with _Ctx(log) as mv:
        while True:
            n -= 1
            if n < 0:
                break
            elif n < length:
                with _Ctx(mv.log):
                    log.append(n)
                break
            else:
                log.append(-n)
    return log


# A finally block ending in an if, then code after the try: 3.11's normal-exit copy of the block
# ends in the jump to that code, which was taken for the if's branch end and dropped, so the
# `return r` vanished (shutil.make_archive returned None; found by the corpus behaviour check).
@case((lambda: 1, None, None), (lambda: 2, lambda: None, None), (lambda: 3, lambda: None, lambda: None))
def finally_ending_in_an_if(a, b, c):
    log = []
    try:
        r = a()
    finally:
        if b is not None:
            if c is not None:
                log.append(c())
            log.append(b())
    return r, log


# A def's docstring has no instruction (it is the first constant): it was dropped.
@case(())
def documented():
    """The docstring, with 'quotes' and "more"."""
    return documented.__doc__


# An if inside a while-else's else block whose branch ends in a break of the outer loop, where
# a nested if jumps to the code after the branch: the break was read as a jump over an else block
# (textwrap.TextWrapper._wrap_chunks was refused; the shape can also give a wrong else).
@case(([1, 2], [], [0, 0], 0), ([1], [5], [0], 0), ([1], [2], [0], 0), ([1, 2, 3], [], [], None), ([1], [7], [1], 0))
def break_in_a_while_else_branch(chunks, lines, cur, mx):
    while chunks:
        chunks.pop()
        if cur:
            if mx is None or len(lines) < mx:
                lines.append(1)
            else:
                while cur:
                    if cur[-1]:
                        lines.append(2)
                        break
                    del cur[-1]
                else:
                    if lines:
                        p = lines[-1]
                        if p > 3:
                            lines[-1] = 0
                            break
                    lines.append(9)
                break
    return lines, chunks


class _Giveup(Exception):
    pass


def _fast(log, how):
    log.append(how)
    if how == "giveup":
        raise _Giveup
    if how == "key":
        raise KeyError(how)


# An if branch ending in a try whose handler falls through past an elif (3.11 places the handler
# after the branch's return): the handler's jump to the code after the if/elif was taken for no
# block's end (shutil.copyfile was refused).
@case(("ok", False), ("giveup", False), ("key", False), (None, True), (None, False), ("key", True))
def try_ending_an_if_branch_before_an_elif(fast, slow):
    log = []
    with _Ctx(log):
        try:
            with _Ctx(log):
                if fast:
                    try:
                        _fast(log, fast)
                        return "fast", log
                    except _Giveup:
                        pass
                elif slow:
                    log.append(2)
                    return "slow", log
                log.append(3)
        except KeyError as e:
            if slow:
                raise ValueError() from e
            else:
                raise
    return "end", log


# A while loop ending the function, with a continue: 3.11 ends the bottom test with its own copy
# of the `return None` the top test jumps to, so the loop seemed to have two exits
# (pprint.PrettyPrinter._format_items was refused). Its result is None: what it does is checked
# by the corpus behaviour check (the pprint workload), here that it runs, or fails alike.
@case(([1, 2, 3], True), ([5, 6], False), ([], True), ([None], True))
def while_ending_the_function_with_a_continue(items, compact):
    it = iter(items)
    out = []
    last = False
    width = 3
    while not last:
        try:
            ent = next(it)
        except StopIteration:
            last = True
            ent = None
        if compact:
            w = len(str(ent))
            if width >= w:
                width -= w
                out.append(ent)
                continue
        out.append(-1)
        if len(out) > 2:
            out.pop(5)
