"""Workloads of the decompiler corpus's behaviour check for the runtime modules of the standard
library (inspect, traceback, typing, enum, collections, dataclasses, functools, contextlib,
asyncio, pathlib, shutil/glob/tempfile, copy/operator/weakref); the registry and what a workload
must return are in tools/decompiler_workloads.py."""
import io
import os
import sys

from decompiler_workloads_text import _catch, w_json, w_textwrap


def w_inspect():
    import inspect

    class Base:
        """Doc of Base."""
        x = 1

        def m(self, a, b=2, *args, c, d=4, **kw) -> int:
            return a

        @property
        def p(self):
            return 1

        @classmethod
        def cm(cls, z): pass

        @staticmethod
        def sm(y=3): pass

    class Sub(Base):
        def m(self, a): return a

    def gen():
        yield 1

    async def co(): pass

    def f(a, /, b: int = 1, *, c, **k) -> str: pass

    out = []
    for obj in (f, Base.m, Base().m, Base.cm, Base.sm, Sub, len, dict.get, str.join, lambda *a: 0, gen, co, max, object.__init__,
                int, type, range, Base.__init__, inspect.signature, functools_partial()):
        sig = _catch(inspect.signature, obj)
        out.append(str(sig))
        if not isinstance(sig, tuple):
            out.append([(p.name, str(p.kind), p.default is p.empty) for p in sig.parameters.values()])
            ba = _catch(sig.bind, 1, 2, c=3)
            out.append(ba if isinstance(ba, tuple) else (ba.args, sorted(ba.kwargs.items())))
            ba = _catch(sig.bind_partial, 1)
            out.append(ba if isinstance(ba, tuple) else (ba.args, sorted(ba.kwargs.items())))
            out.append(hash(sig) == hash(sig.replace()))
    out += [inspect.getfullargspec(f), inspect.cleandoc("  a\n    b\n  c"), inspect.getdoc(Sub), inspect.isgeneratorfunction(gen),
            inspect.iscoroutinefunction(co), inspect.isawaitable(_closed(co())), inspect.isawaitable(1), [n for n, _ in inspect.getmembers(Sub) if not n.startswith("__")],
            inspect.getmro(Sub) == (Sub, Base, object), inspect.getattr_static(Sub(), "x"), inspect.getattr_static(Sub, "p").__class__.__name__,
            inspect.get_annotations(f, eval_str=False) == {"b": int, "return": str}, inspect.getclosurevars(f).builtins,
            inspect.getcomments(w_inspect), len(inspect.getsourcelines(w_textwrap)[0]), inspect.getsource(Base.m).strip().splitlines()[0],
            inspect.getsourcefile(w_json).endswith("decompiler_workloads_text.py"), inspect.getmodulename("/x/y.py"),
            [c[0].__name__ for c in inspect.getclasstree([Sub, Base])[1][0] if isinstance(c, tuple)],
            str(inspect.signature(inspect.Parameter)), inspect.formatannotation(list[int]), inspect.unwrap(f) is f]
    out.append(inspect.getgeneratorstate(gen()))
    out.append(inspect.currentframe().f_code.co_name)
    return out


def _closed(coro):
    coro.close()
    return coro


def functools_partial():
    import functools

    def g(a, b, *, c=1): pass
    return functools.partial(g, 1, c=2)


def w_traceback():
    import traceback

    def inner(n):
        if n == 0:
            raise ValueError("bottom")
        return inner(n - 1)

    def outer():
        try:
            inner(3)
        except ValueError as e:
            raise KeyError("top") from e

    out = []
    try:
        outer()
    except KeyError as e:
        te = traceback.TracebackException.from_exception(e, capture_locals=False)
        lines = list(te.format())
        out.append([ln.split(", line")[0].rsplit("/", 1)[-1] + ln.split(", line")[1].split(",", 1)[-1] if ", line" in ln else ln for ln in lines])
        out.append(list(te.format_exception_only()))
        out.append(len(traceback.extract_tb(e.__traceback__)))
        out.append([fs.name for fs in traceback.extract_tb(e.__cause__.__traceback__)])
        out.append(len(list(traceback.walk_tb(e.__traceback__))))
        out.append(traceback.format_exception_only(type(e), e))
        traceback.clear_frames(e.__traceback__)
    out.append(_catch(lambda: len(list(traceback.walk_stack(None))) > 0))
    out.append([fs.name for fs in traceback.extract_stack(limit=2)])
    try:
        eval("1 +* 2")
    except SyntaxError as e:
        out.append(traceback.format_exception_only(type(e), e))
    try:
        x = [1]
        x[0] + x[0] / 0  # noqa: B018 - the caret anchors of a binary operator
    except ZeroDivisionError as e:
        out.append([ln.rsplit("/", 1)[-1] for ln in traceback.format_exception(e)])
    try:
        d = {"a": {"b": None}}
        d["a"]["b"]["c"]  # noqa: B018
    except TypeError as e:
        out.append([ln.rsplit("/", 1)[-1] for ln in traceback.format_exception(e)])
    return out


def w_typing():
    import typing
    from typing import (Any, Callable, ClassVar, Concatenate, Dict, Generic, List, Literal, NewType, Optional, ParamSpec, Protocol,
                        Tuple, TypeVar, TypeVarTuple, Union, Unpack, get_args, get_origin, get_type_hints, runtime_checkable)
    for clear in typing._cleanups:  # typing's caches, cleared so that each run computes its results
        clear()
    T = TypeVar("T")
    P = ParamSpec("P")
    Ts = TypeVarTuple("Ts")
    out = [repr(Union[int, str, int]), repr(Optional[List[int]]), repr(Dict[str, Tuple[int, ...]]), repr(Callable[[int], str]),
           repr(Callable[Concatenate[int, P], T]), repr(Literal[1, "a", 1]), get_args(Union[int, str]), get_origin(List[int]),
           repr(Tuple[Unpack[Ts]]), repr(Tuple[int, *Ts][str, float]), repr(Callable[P, T][[int], str]), repr(List[T][int])]
    UserId = NewType("UserId", int)
    out.append(UserId(5))

    class Sub(UserId.__supertype__):
        pass
    out.append(_catch(lambda: type("X", (UserId,), {})))

    def subclass_newtype():
        class X(UserId):
            pass
    out.append(_catch(subclass_newtype))

    class G(Generic[T]):
        a: ClassVar[int] = 1
        b: "List[T]"

    out += [repr(G[int]), get_type_hints(G, localns={"List": List, "T": T}), repr(G[int]().__orig_class__)]

    @runtime_checkable
    class Closer(Protocol):
        def close(self) -> None: ...

    class Impl(Closer):
        def __init__(self, v):
            self.v = v

    out += [isinstance(io.StringIO(), Closer), isinstance(1, Closer), Impl(3).v, _catch(Closer)]

    class Gen2(List[int], Generic[T]):
        pass
    out.append([c.__name__ for c in Gen2.__mro__])

    @typing.no_type_check
    def nt(a: int) -> str: pass
    out.append(nt.__no_type_check__)
    out.append(repr(typing._collect_parameters((T, List[P], Ts))) if hasattr(typing, "_collect_parameters") else None)
    out.append(repr(typing.Annotated[int, "m"]))
    return out


def w_enum():
    import enum

    class Color(enum.Enum):
        RED = 1
        GREEN = 2
        BLUE = 3
        ALIAS = 1

        def describe(self):
            return self.name.lower()

    class Perm(enum.IntFlag):
        R = 4
        W = 2
        X = 1

    class Fl(enum.Flag):
        A = enum.auto()
        B = enum.auto()
        C = enum.auto()
        AB = A | B

    class Auto(enum.StrEnum):
        X = enum.auto()
        Y = enum.auto()

    @enum.unique
    class U(enum.IntEnum):
        ONE = 1
        TWO = 2

    out = [list(Color), Color(1), Color["GREEN"], Color.ALIAS is Color.RED, Color.RED.describe(), repr(Perm.R | Perm.W), Perm(7),
           list(Perm(7)), repr(~Perm.R), repr(Fl.A | Fl.C), list(Fl.AB), repr(Fl(0)), Auto.X, list(Auto), U.TWO + 1, _catch(Color, 9),
           repr(enum.Enum("Dyn", "a b c")), [m.value for m in enum.Enum("D2", [("x", 5), ("y", 6)])], Fl.AB in Fl(7)]
    out.append(_catch(lambda: enum.unique(enum.Enum("Dup", [("a", 1), ("b", 1)]))))

    @enum.verify(enum.CONTINUOUS)
    class Cont(enum.IntEnum):
        A = 1
        B = 2
    out.append(list(Cont))
    out.append(_catch(lambda: enum.verify(enum.NAMED_FLAGS)(enum.Flag("Bad", [("A", 1), ("B", 6)]))))

    class Planet(enum.Enum):
        EARTH = (5.97e24, 6.37e6)

        def __init__(self, mass, radius):
            self.mass, self.radius = mass, radius
    out.append(Planet.EARTH.mass)

    @enum._simple_enum(enum.Enum)
    class Simple:
        P = 1
        Q = 2
    out.append(list(Simple))
    out.append(_catch(enum._test_simple_enum, Simple, enum.Enum("Simple", [("P", 1), ("Q", 2)])))

    class Dc(enum.Enum):
        A = 1.5
    out.append(repr(Dc.A))
    import dataclasses
    import types

    @dataclasses.dataclass
    class Pt:
        a: int
        b: int = 0

    class PtEnum(Pt, enum.Enum):
        ORIGIN = 0, 0
        ONE = 1
    out += [repr(PtEnum.ORIGIN), repr(PtEnum.ONE)]
    fake = types.ModuleType("kiln_decompiler_fake_constants")
    fake.A_X, fake.A_Y, fake.B_Z = 1, 2, 3
    sys.modules[fake.__name__] = fake
    try:
        E = enum.IntEnum._convert_("AConst", fake.__name__, lambda n: n.startswith("A_"))
        out += [sorted(E.__members__), repr(fake.A_X)]
        if hasattr(enum, "_old_convert_"):
            E2 = enum._old_convert_(enum.IntEnum, "BConst", fake.__name__, lambda n: n.startswith("B_"))
            out.append(sorted(E2.__members__))
    finally:
        del sys.modules[fake.__name__]
    return out


def w_collections():
    import collections
    Point = collections.namedtuple("Point", "x y", defaults=[0])
    p = Point(1)
    out = [p, p._replace(y=5), p._asdict(), Point._make([3, 4]), _catch(Point, 1, 2, 3)]
    od = collections.OrderedDict.fromkeys("abcde")
    od.move_to_end("b")
    od.move_to_end("d", last=False)
    od.popitem(last=False)
    out += [list(od), list(reversed(od)), list(od.items()), od == collections.OrderedDict(od), repr(od)]
    c = collections.Counter("abracadabra")
    out += [c.most_common(2), sorted((c - collections.Counter("aab")).items()), sorted((c & collections.Counter("aaz")).items()),
            c.total(), sorted(c.elements())[:5]]
    cm = collections.ChainMap({"a": 1}, {"a": 2, "b": 3})
    out += [dict(cm), cm.new_child({"c": 4})["c"], list(cm.parents)]
    dq = collections.deque([1, 2, 3], maxlen=3)
    dq.append(4)
    dd = collections.defaultdict(list)
    dd["k"].append(1)
    ud = collections.UserDict(a=1)
    ul = collections.UserList([3, 1, 2])
    ul.sort()
    us = collections.UserString("abc")
    out += [list(dq), dict(dd), dict(ud), list(ul), us.upper(), us[1:]]
    return out


def w_dataclasses():
    import dataclasses

    @dataclasses.dataclass(order=True, frozen=True)
    class P:
        x: int
        y: int = 0
        tags: tuple = ()

    @dataclasses.dataclass
    class Q:
        a: list = dataclasses.field(default_factory=list)
        b: dataclasses.InitVar[int] = 1
        c: int = dataclasses.field(init=False, default=7)
        _: dataclasses.KW_ONLY
        d: int = 3

        def __post_init__(self, b):
            self.a.append(b)

    @dataclasses.dataclass(slots=True, kw_only=True)
    class R:
        m: int

    p = P(1, 2)
    out = [p, P(2) > p, dataclasses.asdict(p), dataclasses.astuple(p), dataclasses.replace(p, y=9), _catch(setattr, p, "x", 3),
           Q(b=5), Q([1], d=4), R(m=2), [f.name for f in dataclasses.fields(Q)], _catch(dataclasses.replace, Q(), c=1),
           hash(p) == hash(P(1, 2)), dataclasses.is_dataclass(p)]
    M = dataclasses.make_dataclass("M", [("u", int), ("v", str, dataclasses.field(default="s"))], namespace={"f": lambda self: 1})
    out.append((M(1), M(2).f()))
    return out


def w_functools():
    import functools

    @functools.lru_cache(maxsize=2)
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    @functools.singledispatch
    def show(x):
        return "obj"

    @show.register
    def _(x: int):
        return "int"

    @show.register(list)
    def _l(x):
        return "list"

    class K:
        @functools.cached_property
        def v(self):
            return 5

        @functools.singledispatchmethod
        def m(self, a):
            return "base"

        @m.register
        def _(self, a: str):
            return "str"

    @functools.total_ordering
    class O:
        def __init__(self, v):
            self.v = v

        def __lt__(self, o):
            return self.v < o.v

        def __eq__(self, o):
            return self.v == o.v

    out = [fib(20), fib.cache_info(), show(1), show([]), show("s"), K().v, K().m(1), K().m("a"), O(1) >= O(2), O(3) > O(2),
           sorted([3, 1, 2], key=functools.cmp_to_key(lambda a, b: b - a)), functools.reduce(lambda a, b: a * b, [1, 2, 3, 4]),
           functools.partial(max, 1)(5), repr(functools.partialmethod(max, 1)).split(" at ")[0]]
    k = functools.cmp_to_key(lambda a, b: a - b)
    out += [k(1) < k(2), k(2) == k(2), k(3) >= k(1), k(1) <= k(1), k(2) > k(3), _catch(hash, k(1))]
    return out


def w_contextlib():
    import contextlib
    import asyncio
    log = []

    @contextlib.contextmanager
    def cm(tag, swallow=False):
        log.append("enter " + tag)
        try:
            yield tag
        except ValueError:
            log.append("caught " + tag)
            if not swallow:
                raise
        finally:
            log.append("exit " + tag)

    with cm("a") as v:
        log.append(v)
    with cm("b", True):
        raise ValueError
    log.append(_catch(lambda: [None for _ in cm("c")]))
    try:
        with cm("d"):
            raise ValueError("x")
    except ValueError:
        log.append("outer caught")
    with contextlib.ExitStack() as st:
        st.callback(log.append, "cb")
        st.enter_context(cm("e"))
        st.push(lambda *e: log.append("push") or False)

        class X:
            def __exit__(self, *a):
                log.append("X exit")
        st.push(X())
    with contextlib.suppress(KeyError):
        {}["k"]
    with contextlib.redirect_stdout(io.StringIO()) as s:
        print("hi")
    log.append(s.getvalue())

    @contextlib.asynccontextmanager
    async def acm(t):
        log.append("aenter " + t)
        try:
            yield t
        finally:
            log.append("aexit " + t)

    async def main():
        async with acm("x") as v:
            log.append(v)
        try:
            async with acm("y"):
                raise KeyError
        except KeyError:
            log.append("akey")
        async with contextlib.AsyncExitStack() as st:
            await st.enter_async_context(acm("z"))

            async def ex(*a):
                log.append("async exit")
            st.push_async_exit(ex)
            st.push_async_callback(ex)
    asyncio.run(main())
    with contextlib.nullcontext(5) as n:
        log.append(n)
    with contextlib.closing(io.StringIO()):
        pass
    return log


def w_asyncio():
    import asyncio
    log = []

    async def producer(q, n):
        for i in range(n):
            await q.put(i)
            await asyncio.sleep(0)
        await q.put(None)

    async def consumer(q, name):
        while (item := await q.get()) is not None:
            log.append((name, item))
            q.task_done()
        q.task_done()

    async def main():
        q = asyncio.Queue(maxsize=2)
        await asyncio.gather(producer(q, 5), consumer(q, "c"))
        lock = asyncio.Lock()
        cond = asyncio.Condition()
        ev = asyncio.Event()
        sem = asyncio.Semaphore(2)

        async def worker(i):
            async with sem:
                async with lock:
                    log.append(("w", i))
                await asyncio.sleep(0)
            async with cond:
                await cond.wait_for(lambda: ev.is_set())
                log.append(("woke", i))

        tasks = [asyncio.create_task(worker(i)) for i in range(3)]
        for _ in range(5):  # (no timed sleeps: the order of events must not depend on speed)
            await asyncio.sleep(0)
        log.append(len(asyncio.all_tasks()))
        ev.set()
        async with cond:
            cond.notify_all()
        await asyncio.wait_for(asyncio.gather(*tasks), 1)
        t = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        t.cancel()
        log.append(_catch_async_result(await asyncio.gather(t, return_exceptions=True)))
        pq = asyncio.PriorityQueue()
        for v in (3, 1, 2):
            pq.put_nowait(v)
        log.append([pq.get_nowait() for _ in range(3)])
        lq = asyncio.LifoQueue()
        lq.put_nowait(1)
        log.append(_catch(asyncio.Queue().get_nowait))
        log.append(lq.get_nowait())
        async with asyncio.timeout(1):
            await asyncio.sleep(0)
        return "done"
    log.append(asyncio.run(main()))

    async def main_py_tasks():  # the pure-Python Task (Task.__step, __wakeup), where the C one is the default
        asyncio.get_running_loop().set_task_factory(lambda loop, coro, **kw: asyncio.tasks._PyTask(coro, loop=loop, **kw))
        return await asyncio.create_task(main())
    if hasattr(asyncio.tasks, "_PyTask"):
        log.append(asyncio.run(main_py_tasks()))

    async def main_eager():  # 3.12's eager tasks (Task.__eager_start), pure-Python ones
        asyncio.get_running_loop().set_task_factory(asyncio.create_eager_task_factory(asyncio.tasks._PyTask))
        return await asyncio.create_task(main())
    if hasattr(asyncio, "create_eager_task_factory") and hasattr(asyncio.tasks, "_PyTask"):
        log.append(asyncio.run(main_eager()))
    return log


def _catch_async_result(r):
    return [type(x).__name__ for x in r]


def w_pathlib():
    import pathlib
    import tempfile
    out = []
    p = pathlib.PurePosixPath("/a/b/../c.tar.gz")
    out += [p.parts, p.name, p.suffix, p.suffixes, p.stem, str(p.parent), str(p.with_suffix(".x")), p.match("*.gz"), str(p / "d"),
            str(p.relative_to("/a")), _catch(p.relative_to, "/q"), p.is_absolute(), str(pathlib.PurePosixPath("x").joinpath("y", "/z"))]
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for rel in ("a/b/c.txt", "a/d.py", "e.py", "a/b/f/g.py"):
            q = root / rel
            q.parent.mkdir(parents=True, exist_ok=True)
            q.write_text(rel)
        out += [sorted(str(x.relative_to(root)) for x in root.glob("**/*.py")), sorted(str(x.relative_to(root)) for x in root.rglob("*.txt")),
                sorted(str(x.relative_to(root)) for x in root.glob("a/*/c.txt")), sorted(str(x.relative_to(root)) for x in root.glob("*")),
                (root / "e.py").read_text(), (root / "a").is_dir()]
        if hasattr(root, "walk"):
            out.append(sorted((str(dp.relative_to(root)), sorted(dn), sorted(fn)) for dp, dn, fn in root.walk()))
    return out


def w_shutil_glob_tempfile():
    import glob
    import shutil
    import tempfile
    out = []
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        for rel in ("a/b.txt", "a/c/d.py", "e.py", ".hid"):
            fp = os.path.join(src, rel)
            os.makedirs(os.path.dirname(fp), exist_ok=True)
            with open(fp, "w") as f:
                f.write(rel * 100)
        shutil.copytree(src, os.path.join(d, "dst"), ignore=shutil.ignore_patterns("*.txt"))
        out.append(sorted(os.path.relpath(os.path.join(dp, f), d) for dp, _, fs in os.walk(d) for f in fs))
        shutil.copyfile(os.path.join(src, "e.py"), os.path.join(d, "copy.py"))
        with open(os.path.join(src, "e.py"), "rb") as a, open(os.path.join(d, "obj.bin"), "wb") as b:
            shutil.copyfileobj(a, b, 7)
        shutil.move(os.path.join(d, "copy.py"), os.path.join(d, "moved.py"))
        shutil.move(os.path.join(d, "dst"), os.path.join(d, "dst2"))
        arc = shutil.make_archive(os.path.join(d, "arch"), "zip", src)
        shutil.unpack_archive(arc, os.path.join(d, "unz"))
        out.append(sorted(os.path.relpath(p, d) for p in glob.glob(os.path.join(d, "**", "*.py"), recursive=True)))
        out.append(sorted(os.path.relpath(p, d) for p in glob.glob(os.path.join(d, "*", ".*"))))
        out.append(sorted(glob.glob("**/*.py", root_dir=src, recursive=True)))
        out.append(glob.escape("a[b]*?"))
        shutil.rmtree(os.path.join(d, "dst2"))
        out.append(_catch(shutil.rmtree, os.path.join(d, "nope")))
        out.append(sorted(os.listdir(d)))
        out.append(os.path.getsize(os.path.join(d, "obj.bin")))
        out.append(shutil.which("sh") is not None)
        with tempfile.NamedTemporaryFile("w+", dir=d) as t:
            t.write("x")
            t.seek(0)
            out.append(t.read())
        with tempfile.SpooledTemporaryFile(5, "w+") as t:
            t.write("abcdefgh")
            t.seek(0)
            out.append(t.read())
        td = tempfile.TemporaryDirectory(dir=d)
        os.makedirs(os.path.join(td.name, "x", "y"))
        os.chmod(os.path.join(td.name, "x"), 0o500)
        td.cleanup()
        out.append(os.path.exists(td.name))
        return repr(out).replace(d, "<tmp>")


def w_copy_operator_weakref():
    import copy
    import operator
    import weakref

    class N:
        def __init__(self, v):
            self.v = v
            self.me = self

    x = {"a": [1, (2, [3])], "t": (N(1), 2), "e": ()}
    y = copy.deepcopy(x)
    out = [y["a"], y["t"][0].v, y["t"][0].me is y["t"][0], copy.copy(x)["a"] is x["a"], copy.deepcopy((1, 2)), copy.deepcopy(((), [1]))]
    out += [operator.truth(0), operator.truth([1]), operator.itemgetter(1, 0)("ab"), operator.attrgetter("v")(N(3)),
            operator.methodcaller("upper")("x"), operator.length_hint([1, 2]), operator.countOf([1, 1, 2], 1), operator.indexOf("abc", "c")]

    class O:
        pass
    objs = [O() for _ in range(3)]
    wk = weakref.WeakKeyDictionary({o: i for i, o in enumerate(objs)})
    for k in list(wk.keys()):
        pass
    it = iter(wk.items())
    next(it)
    del objs[0]
    del it
    out.append(sorted(wk.values()))
    wv = weakref.WeakValueDictionary({i: o for i, o in enumerate(objs)})
    out.append(sorted(wv.keys()))
    ws = weakref.WeakSet(objs)
    out.append(len(ws))
    log = []
    fin = weakref.finalize(objs[0], log.append, "fin")
    out += [fin.alive, fin.peek()[2:] if fin.peek() else None]
    objs.clear()
    out += [log, fin.alive]
    return out
