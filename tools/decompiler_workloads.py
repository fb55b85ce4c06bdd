"""Test inputs for the decompiler corpus's behaviour check (tools/decompiler_corpus.py --behaviour).

WORKLOADS maps a corpus module (import name) to a function that drives the module's public API on
fixed inputs and returns a deterministic value (text, numbers, tuples; no object ids, times or
temporary paths). The corpus tool runs each workload with the module's functions as compiled
from their own source, then with every function's code replaced by the recompiled decompiled
source, and compares the two results; a function counts as behaviour-checked when its replaced
code ran. Runs under 3.11 and 3.12 with the standard library only; the torch workloads are
skipped where torch is not installed (the 3.12 interpreter)."""
import io
import os
import sys


def _catch(f, *a, **k):
    try:
        return f(*a, **k)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the exception is part of the result (argparse exits)
        return ("raise", type(e).__name__, str(e))


def w_textwrap():
    import textwrap
    t = "The quick brown fox. Jumps over the lazy dog!  Again? Yes.  A very-long-hyphenated-word-here and more text " * 3
    out = []
    for width in (8, 20, 41):
        out.append(textwrap.wrap(t, width, fix_sentence_endings=True, break_on_hyphens=width > 10))
        out.append(textwrap.fill(t, width, initial_indent="> ", subsequent_indent="  ", max_lines=4, placeholder=" ..."))
    out.append(textwrap.dedent("    a\n      b\n\n    c\n"))
    out.append(textwrap.indent("a\n\nb\n", "+ ", lambda s: True))
    out.append(textwrap.shorten("Hello  world, this is a test", 12))
    out.append(_catch(textwrap.wrap, "abc", 0))
    out.append(textwrap.TextWrapper(width=10, expand_tabs=True, tabsize=4, drop_whitespace=False).wrap("a\tb  c\td e f g h"))
    return out


def w_json():
    import json
    obj = {"a": [1, 2.5, None, True, {"b": "x\u00e9\n"}], "c": [], "d": {}, "e": float("inf"), "f": (1, 2)}
    out = [json.dumps(obj), json.dumps(obj, indent=2, sort_keys=True), json.dumps(obj, ensure_ascii=False, separators=(",", ":"))]
    out.append(_catch(json.dumps, obj, allow_nan=False))
    out.append(_catch(json.dumps, {1: set()}))
    out.append(json.dumps({1: 2, 2.5: 3, None: 4, True: 5}))
    for s in ('{"a": [1, 2, {"b": null}], "c": "\\u00e9\\n", "d": [], "e": {}}', "[1, 2, 3 ]", '[ ]', '{"a": }', "[1,", '"\\ud83d\\ude00"',
              "NaN", "[1, 2] x", '{"a" 1}', '[1 2]', '{"a": 1,}'):
        out.append(_catch(json.loads, s))
    out.append(json.loads('{"a": 1.5, "b": [2]}', parse_float=str, object_pairs_hook=list))
    import json.scanner
    dec = json.JSONDecoder()  # the pure-Python scanner, which calls decoder.JSONArray and JSONObject
    dec.scan_once = json.scanner.py_make_scanner(dec)
    for s in ('{"a": [1, [], {}, [2, [3]]], "b": {"c": null}}', "[1, 2,]", '[1 2]', '{"a" 1}', "[", '{"a": 1, }'):
        out.append(_catch(dec.decode, s))
    return out


def w_string():
    import string
    out = [string.capwords(" hello  world "), string.capwords("a-b-c", "-")]
    t = string.Template("$who likes ${what} $$ $missing")
    out += [t.safe_substitute(who="tim", what="kung pao"), _catch(t.substitute, who="x"), _catch(string.Template("$").substitute)]
    f = string.Formatter()
    out += [f.format("{0}-{x!r:>5}-{y[1]}-{z.real}", 1, x="a", y=[0, 9], z=3), _catch(f.format, "{0}{}", 1)]
    out.append(f.format("{:{w}.{p}f}", 3.14159, w=10, p=2))
    return out


def w_shlex():
    import shlex
    out = []
    for s in ("a 'b c' \"d e\" f\\ g # comment", "x=1 y='2 3'", "echo $HOME;ls|wc", "unterminated 'quote"):
        out.append(_catch(shlex.split, s, comments=True))
        out.append(_catch(shlex.split, s, posix=False))
        lex = shlex.shlex(s, posix=True, punctuation_chars=True)
        lex.whitespace_split = False
        out.append(_catch(list, lex))
        out.append(_catch(list, shlex.shlex(s)))
    out += [shlex.quote("a b'c"), shlex.join(["x", "y z", ""])]
    import contextlib
    buf = io.StringIO()
    if hasattr(shlex, "_print_tokens"):
        with contextlib.redirect_stdout(buf):
            shlex._print_tokens(shlex.shlex("a 'b c' d"))
    out.append(buf.getvalue())
    return out


def w_heapq():
    import heapq
    data = [5, 3, 9, 1, 7, 1, 8, 2, 6]
    h = []
    for x in data:
        heapq.heappush(h, x)
    out = [[heapq.heappop(h) for _ in range(4)], h[:]]
    heapq.heapify(data)
    out.append(data[:])
    out.append(heapq.heapreplace(data, 4))
    out.append(heapq.heappushpop(data, 0))
    out += [list(heapq.merge([1, 4, 7], [2, 5, 8], [0, 9])), list(heapq.merge([3, 1], [2], key=lambda v: -v, reverse=True)),
            list(heapq.merge([], [1])), list(heapq.merge([1, 2], [3], key=abs))]
    for n in (0, 1, 3, 20):
        out += [heapq.nlargest(n, [4, 1, 8, 3, 9, 2]), heapq.nsmallest(n, [4, 1, 8, 3], key=lambda v: -v),
                heapq.nlargest(n, iter([4, 1, 8]), key=str)]
    for xs in ([1, 5, 3, 0], [9, 8, 7, 6, 2]):
        heapq._siftdown(xs, 0, len(xs) - 1)
        heapq._siftdown_max(xs, 0, len(xs) - 1)
        heapq._siftup(xs, 0)
        heapq._siftup_max(xs, 0)
        out.append(xs)
    mh = [3, 1, 2]
    heapq._heapify_max(mh)
    out.append(heapq._heappop_max(mh))
    out.append(heapq._heapreplace_max(mh, 0))
    return out


def w_bisect():
    import bisect
    a = [1, 2, 2, 4, 8]
    out = [bisect.bisect_left(a, 2), bisect.bisect_right(a, 2), bisect.bisect(a, 5, 1, 4), bisect.bisect_left(a, 3, key=None)]
    bisect.insort(a, 3)
    bisect.insort_left(a, 2)
    out += [a, _catch(bisect.bisect_left, a, 1, -1)]
    return out


def w_fnmatch():
    import fnmatch
    out = []
    for p in ("*.py", "a?c", "[!x-z]*", "[]]", "[a-", "**/x", "[z-a]"):
        out += [fnmatch.translate(p), fnmatch.filter(["a.py", "abc", "x.c", "]", "q"], p), fnmatch.fnmatch("ABC", p.upper())]
    return out


def w_posixpath():
    import posixpath as pp
    paths = ["/a/./b/../c//d", "", "../..", "a/b/", "/", "//x", "~/q", "~nouser_zz/q", "$HOME/x${Y}z$", ".hidden.tar.gz"]
    out = []
    env = {"HOME": "/h", "Y": "yy"}
    for p in paths:
        out += [pp.normpath(p), pp.split(p), pp.splitext(p), pp.basename(p), pp.dirname(p), pp.isabs(p)]
        out.append(pp.join(p, "z", "/r") if p else pp.join("z"))
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        out += [pp.expandvars(p) for p in paths] + [pp.expanduser(p) for p in paths]
    finally:
        os.environ.clear()
        os.environ.update(old)
    out += [pp.relpath("/a/b/c", "/a/d"), _catch(pp.relpath, ""), pp.commonpath(["/a/b", "/a/c/d"]), _catch(pp.commonpath, ["/a", "b"]),
            pp.commonprefix(["abc", "abd"]), pp.normpath(b"/x/../y"), pp.splitdrive("/a")]
    return out


def w_colorsys():
    import colorsys as c
    out = []
    for rgb in ((0.2, 0.4, 0.4), (1, 0, 0), (0, 0, 0), (1, 1, 1), (0.5, 0.9, 0.1), (0.9, 0.1, 0.5)):
        for a, b in ((c.rgb_to_hsv, c.hsv_to_rgb), (c.rgb_to_hls, c.hls_to_rgb), (c.rgb_to_yiq, c.yiq_to_rgb)):
            y = a(*rgb)
            out.append((tuple(round(v, 9) for v in y), tuple(round(v, 9) for v in b(*y))))
    return out


def w_statistics():
    import statistics as s
    from fractions import Fraction
    data = [2.5, 3.25, 5.5, 11.25, 11.75]
    out = [s.mean(data), s.fmean(data), s.geometric_mean(data), s.harmonic_mean(data), s.median(data), s.median_low([1, 3, 5, 7]),
           s.median_high([1, 3, 5, 7]), s.median_grouped([1, 2, 2, 3, 4, 4, 4, 4, 4, 5]), s.mode("aabbbc"), s.multimode("aabbcc"),
           s.pstdev(data), s.pvariance(data), s.stdev(data), s.variance(data), s.quantiles(data, n=4),
           s.quantiles(data, n=3, method="inclusive"), s.mean([Fraction(1, 3), Fraction(2, 3)]), s.variance([1, 2, 4]),
           s.covariance([1, 2, 3], [1, 2, 5]), s.correlation([1, 2, 3], [1, 2, 5]), s.linear_regression([1, 2, 3], [2, 4, 7]),
           _catch(s.mean, []), _catch(s.stdev, [1]), s.mean([1, 2, 3]), s.harmonic_mean([2, 4], weights=[1, 3])]
    nd = s.NormalDist(1, 2)
    out += [nd.cdf(0.5), nd.inv_cdf(0.3), nd.pdf(1.5), nd.overlap(s.NormalDist(2, 1)), nd.quantiles(), repr(nd + 2), repr(nd * 3),
            nd.zscore(3), repr(s.NormalDist.from_samples([1, 2, 3, 4]))]
    return out


def w_difflib():
    import difflib
    difflib.HtmlDiff._default_prefix = 0  # a counter of the tables made: each run starts from 0
    a = ["one\n", "two\n", "three\n", "four\n", "five five\n", "six\n"]
    b = ["zero\n", "one\n", "tree\n", "four\n", "five fife\n", "seven\n", "six\n"]
    out = [list(difflib.unified_diff(a, b, "a", "b")), list(difflib.context_diff(a, b)), list(difflib.ndiff(a, b)),
           list(difflib.restore(difflib.ndiff(a, b), 2)), difflib.get_close_matches("appel", ["ape", "apple", "peach", "puppy"])]
    sm = difflib.SequenceMatcher(None, "abxcd" * 3, "abcd" * 3)
    out += [sm.get_matching_blocks(), sm.get_opcodes(), round(sm.ratio(), 9), sm.quick_ratio(), sm.real_quick_ratio(),
            list(sm.get_grouped_opcodes(1))]
    out.append(difflib.HtmlDiff(wrapcolumn=8).make_table(a, b, context=True, numlines=1))
    out.append(difflib.HtmlDiff(tabsize=4).make_file(["a\tb\n", "x" * 30 + "\n"], ["a\tc\n", "y" * 30 + "\n"]))
    out.append(list(difflib.diff_bytes(difflib.unified_diff, [b"a\n"], [b"b\n"])))
    return out


def w_argparse():
    import argparse
    p = argparse.ArgumentParser(prog="prog", description="desc " * 20, epilog="epi", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                exit_on_error=False)
    p.add_argument("pos", nargs="+", type=int, help="positional")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--name", choices=["a", "b"], default="a", metavar="N")
    p.add_argument("--opt", nargs="?", const="c", default="d")
    p.add_argument("--list", nargs="*", action="extend")
    p.add_argument("--flag", action=argparse.BooleanOptionalAction)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--x", action="store_true")
    g.add_argument("--y", action="store_const", const=5)
    p.add_argument("--pair", nargs=2, type=float)
    sub = p.add_subparsers(dest="cmd")
    s1 = sub.add_parser("run", help="run it", aliases=["r"])
    s1.add_argument("--fast", action="store_true")
    out = [p.format_help(), p.format_usage(), s1.format_help()]
    for argv in (["1", "2", "-vv", "--name", "b"], ["3", "--opt", "--list", "a", "b", "--list", "c", "--no-flag"],
                 ["4", "--x", "--pair", "1.5", "2", "run", "--fast"], ["5", "--verb", "--na=a"], ["6", "-vvv", "--opt=q"],
                 ["--x", "--y", "1"], ["x"], [], ["1", "--name", "zz"], ["1", "--unknown"], ["1", "--", "-2"]):
        out.append(_catch(lambda: sorted(vars(p.parse_known_args(argv)[0]).items(), key=str)))
    p2 = argparse.ArgumentParser(prog="p2", exit_on_error=False, formatter_class=argparse.RawDescriptionHelpFormatter, prefix_chars="-+")
    p2.add_argument("a")
    p2.add_argument("b", nargs="?")
    p2.add_argument("+z", type=int, required=True)
    out.append(_catch(lambda: vars(p2.parse_intermixed_args(["x", "+z", "3", "y"]))))
    out.append(_catch(lambda: vars(p2.parse_known_intermixed_args(["+z", "1", "q"])[0])))
    out.append(p2.format_help())
    out.append(repr(argparse.FileType("r", 10, "utf-8")))
    return out


def w_ast():
    import ast
    src = ("def f(a, /, b=1, *c, d, **e) -> int:\n    '''doc'''\n    x = {1, 2}; y = {}; z = set()\n    s = f'{a!r:>{b}} {{}}'\n"
           "    return [i async for i in c] if a else (lambda q: q)(b)\n"
           "class C(B, metaclass=M):\n    @dec\n    async def m(self):\n        async with a as b, c: await x\n"
           "match v:\n    case [1, *r] | {'k': 2, **rest} if r: pass\n    case Point(x=0): pass\n"
           "x = 1e1000, -1e1000j, ..., b'x', 'a' 'b', (yield)\nglobal g\ntry: pass\nexcept* E: pass\n")
    tree = ast.parse(src)
    out = [ast.unparse(tree), ast.dump(tree, indent=1)[:4000], [type(n).__name__ for n in ast.walk(tree)],
           ast.get_docstring(tree.body[0]), ast.literal_eval("{'a': (1, -2.5j, {3}), 'b': [None, True]}"),
           _catch(ast.literal_eval, "f(x)"), ast.unparse(ast.parse("a[1:2, ::3] = not -x ** 2 < y is not z")),
           ast.get_source_segment(src, tree.body[0].body[1]), ast.unparse(ast.Constant(value=float("inf"))),
           ast.unparse(ast.Set(elts=[])), ast.unparse(ast.Constant(value=(1, "a", ...)))]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out += [ast.dump(ast.Num(5)), ast.dump(ast.Str("s")), _catch(ast.Num, "x"), _catch(ast.Num, 1, 2, 3)]
    ast.increment_lineno(tree, 3)
    out.append(tree.body[0].lineno)
    out.append(ast.unparse(ast.fix_missing_locations(ast.Expression(body=ast.BinOp(ast.Constant(1), ast.Add(), ast.Name("x"))))))
    return out


def w_configparser():
    import configparser
    text = ("[DEFAULT]\nbase = /b\n[s1]\nk = %(base)s/x\nn = 3\nf = yes\nl = a\n  b\n[s2]\np = ${s1:k}/y\nq = $$ ${base}\n"
            "[bad]\nr = %(nope)s\nt = 100%%\n")
    out = []
    legacy = [configparser.LegacyInterpolation()] if hasattr(configparser, "LegacyInterpolation") else []
    for interp in [configparser.BasicInterpolation(), configparser.ExtendedInterpolation(), None] + legacy:
        c = configparser.ConfigParser(interpolation=interp, converters={"list": lambda s: s.split()})
        c.read_string(text)
        for sec in c.sections():
            for k in c[sec]:
                out.append((sec, k, _catch(c.get, sec, k)))
        out += [_catch(c.getint, "s1", "n"), _catch(c.getboolean, "s1", "f"), _catch(c.getlist, "s1", "l"), c.has_option("s1", "zz")]
        s = io.StringIO()
        c.write(s)
        out.append(s.getvalue())
    raw = configparser.RawConfigParser()
    out.append(_catch(raw.read_string, "[a]\nx=1\n[a]\n"))
    out.append(_catch(configparser.ConfigParser().read_string, "no section\n"))
    return out


def w_csv():
    import csv
    data = "a,b,c\n1,\"x, y\",3\n4,5,\"q\"\"z\"\n"
    out = [list(csv.reader(io.StringIO(data))), [dict(r) for r in csv.DictReader(io.StringIO(data))]]
    sn = csv.Sniffer()
    for sample in (data, "a;b;c\n1;2;3\n", "'a'|'b'\n'1'|'2'\n", "x y z\n1 2 3\n", "single\n"):
        d = _catch(sn.sniff, sample)
        out.append(d if isinstance(d, tuple) else (d.delimiter, d.quotechar, d.doublequote, d.skipinitialspace))
        out.append(_catch(sn.has_header, sample))
    s = io.StringIO()
    w = csv.DictWriter(s, ["a", "b"], extrasaction="ignore")
    w.writeheader()
    w.writerows([{"a": 1, "b": "x,y", "c": 3}, {"a": None}])
    out.append(s.getvalue())
    return out


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
            inspect.getsourcefile(w_json).endswith("decompiler_workloads.py"), inspect.getmodulename("/x/y.py"),
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


def w_ipaddress():
    import ipaddress as ip
    out = [list(ip.summarize_address_range(ip.ip_address("10.0.0.1"), ip.ip_address("10.0.0.20"))),
           list(ip.collapse_addresses([ip.ip_network(n) for n in ("10.0.0.0/25", "10.0.0.128/25", "10.0.1.0/24", "10.0.0.7/32")])),
           list(ip.ip_network("192.168.0.0/29").hosts()), list(ip.ip_network("10.0.0.0/30").subnets(1)), str(ip.ip_network("10.0.0.0/24").supernet(2)),
           list(ip.ip_network("10.0.0.0/24").address_exclude(ip.ip_network("10.0.0.64/26"))), ip.ip_address("::ffff:1.2.3.4").ipv4_mapped,
           str(ip.ip_address("2001:db8::1").exploded), ip.ip_interface("10.1.2.3/16").network, _catch(ip.ip_address, "300.1.1.1"),
           ip.ip_address("127.0.0.1").is_loopback, _catch(list, ip.summarize_address_range(ip.ip_address("10.0.0.9"), ip.ip_address("10.0.0.1")))]
    return out


def w_fractions():
    import fractions
    from fractions import Fraction as F
    if hasattr(getattr(fractions, "_hash_algorithm", None), "cache_clear"):
        fractions._hash_algorithm.cache_clear()  # (cached across runs: the replaced code would not run)
    out = [F(3, 4) + F(1, 6), F("1.25e-2"), F(" -3/7 "), F(0.1), F(1.5).limit_denominator(10), F(22, 7).limit_denominator(3),
           _catch(F, "x"), _catch(F, 1, 0), F(7, 3) // 2, F(7, 3) % F(1, 2), divmod(F(7, 3), 1), F(2, 3) ** 2, F(4, 9) ** F(1, 2),
           round(F(7, 2)), round(F(5, 2)), round(F(17, 7), 2), hash(F(1, 3)), hash(F(5)), F(3, 4) < 0.8, F(1, 3) == 1 / 3,
           _catch(format, F(1, 3), ".5f"), F(10, 4).as_integer_ratio(), F.from_decimal(__import__("decimal").Decimal("1.1")), F("5")]
    return out


def w_random():
    import random
    r = random.Random(12345)
    return [r.random(), r.randint(1, 100), r.choice("abcdef"), r.sample(range(100), 5), r.gauss(0, 1), r.gammavariate(0.5, 2),
            r.gammavariate(1.0, 1), r.gammavariate(3.0, 2), r.betavariate(2, 3), r.choices("abc", [1, 2, 3], k=5), r.uniform(1, 2),
            r.triangular(0, 1, 0.2), r.expovariate(2), r.vonmisesvariate(1, 2), r.paretovariate(2), r.weibullvariate(1, 2),
            r.binomialvariate(10, 0.3) if hasattr(r, "binomialvariate") else 0, r.randrange(0, 100, 7), r.getrandbits(20),
            r.lognormvariate(0, 1), r.normalvariate(0, 1), sorted(r.sample(["a", "b", "c"], counts=[2, 1, 1], k=3))]


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


def w_tokenize_pprint_calendar_gettext():
    import calendar
    import gettext
    import pprint
    import tokenize
    src = "def f(x):\n    return x + 1  # c\nclass A:\n\tpass\ns = f'''a{b}'''\n"
    out = [[(tokenize.tok_name[t.type], t.string) for t in tokenize.generate_tokens(io.StringIO(src).readline)]]
    out.append(_catch(lambda: list(tokenize.generate_tokens(io.StringIO("(\n").readline))))
    out.append(pprint.pformat({"a": list(range(30)), "b": ("x" * 50, {"c": {1, 2}}), "d": [[1, 2]] * 5}, width=30, compact=True))
    out.append(pprint.pformat(list(range(40)), width=20))
    out += [calendar.month(2024, 2), calendar.monthcalendar(2023, 12), calendar.isleap(2000), calendar.weekday(2024, 1, 1),
            calendar.HTMLCalendar().formatmonth(2024, 3)[:500], calendar.TextCalendar(6).formatyear(2021)[:300]]
    for expr in ("n != 1", "n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2", "(n==1)?0:(n>=2&&n<=4)?1:2"):
        f = gettext.c2py(expr)
        out.append([f(n) for n in (0, 1, 2, 5, 11, 22, 101)])
    out.append(_catch(gettext.c2py, "n +* 2"))
    out.append(gettext.find("nothing", localedir="/nonexistent", all=True))
    t = gettext.NullTranslations()
    out += [t.ngettext("a", "b", 2), t.npgettext("c", "a", "b", 1)]
    gt = gettext.GNUTranslations(io.BytesIO(_mo_file({"": "Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=2; plural=n != 1;\n",
                                                     "hello": "hallo", "dog\x00dogs": "Hund\x00Hunde",
                                                     "ctx\x04cat\x00cats": "Katze\x00Katzen", "ctx\x04hi": "moin"})))
    for n in (0, 1, 2):
        out += [gt.ngettext("dog", "dogs", n), gt.npgettext("ctx", "cat", "cats", n), gt.ngettext("x", "xs", n),
                gt.npgettext("zz", "y", "ys", n)]
    out += [gt.gettext("hello"), gt.gettext("nope"), gt.pgettext("ctx", "hi"), gt.pgettext("ctx", "nope"), gt.info()]
    return out


def _mo_file(messages):
    """A GNU .mo catalogue (little-endian) of the messages, original -> translation."""
    import struct
    keys = sorted(messages)
    ids = b"".join(k.encode() + b"\0" for k in keys)
    strs = b"".join(messages[k].encode() + b"\0" for k in keys)
    start = 7 * 4 + 16 * len(keys)
    offs, o = [], 0
    for k in keys:
        offs.append((len(k.encode()), start + o))
        o += len(k.encode()) + 1
    toffs, o = [], 0
    for k in keys:
        toffs.append((len(messages[k].encode()), start + len(ids) + o))
        o += len(messages[k].encode()) + 1
    head = struct.pack("<7I", 0x950412DE, 0, len(keys), 7 * 4, 7 * 4 + 8 * len(keys), 0, 0)
    return head + b"".join(struct.pack("<2I", *x) for x in offs + toffs) + ids + strs


def w_torch_nn():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    out = []
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0),
                      nn.Linear(4 * 4 * 4, 10), nn.LayerNorm(10), nn.GELU())
    x = torch.randn(2, 3, 8, 8)
    y = m(x)
    out.append(y.detach())
    out.append([n for n, _ in m.named_modules()])
    out.append([n for n, _ in m.named_parameters()])
    out.append(sorted(m.state_dict().keys()))
    m2 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0),
                       nn.Linear(4 * 4 * 4, 10), nn.LayerNorm(10), nn.GELU())
    r = m2.load_state_dict(m.state_dict())
    out.append((r.missing_keys, r.unexpected_keys))
    bad = dict(m.state_dict())
    bad["extra"] = torch.zeros(1)
    out.append(_catch(m2.load_state_dict, bad))
    out.append(str(m2.load_state_dict(bad, strict=False)))
    out.append(str(m))
    for mode in ("nearest", "bilinear", "bicubic", "area"):
        out.append(F.interpolate(x, scale_factor=1.5, mode=mode, **({} if mode in ("nearest", "area") else {"align_corners": False})))
    out.append(F.interpolate(x, size=(4, 5)))
    out.append(_catch(F.interpolate, x, size=(4, 5), scale_factor=2))
    rnn = nn.LSTM(4, 5, num_layers=2, batch_first=True)
    out.append(rnn(torch.randn(2, 3, 4))[0].detach())
    out.append(rnn._weights_have_changed() if hasattr(rnn, "_weights_have_changed") else None)
    tr = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    out.append(tr(torch.randn(2, 3, 8)).detach())
    out.append([F.cross_entropy(y, torch.tensor([1, 2])), F.mse_loss(y, torch.zeros_like(y)), F.softmax(y, -1).sum(-1)])
    out.append(m._slow_forward(x).detach() if hasattr(m, "_slow_forward") else None)
    return out


def w_torch_optim():
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    out = []
    for make in (lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True, foreach=False), lambda p: torch.optim.AdamW(p, foreach=False),
                 lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, foreach=False),
                 lambda p: torch.optim.RMSprop(p, centered=True, momentum=0.5, foreach=False), lambda p: torch.optim.Adagrad(p, foreach=False),
                 lambda p: torch.optim.Adam(p, lr=0.01, foreach=False, weight_decay=0.1, maximize=True)):
        torch.manual_seed(1)
        lin = nn.Linear(3, 2)
        opt = make(lin.parameters())
        scheds = [torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e)]
        for _ in range(3):
            opt.zero_grad()
            lin(torch.randn(4, 3)).pow(2).sum().backward()
            opt.step()
            for s in scheds:
                s.step()
        sd = opt.state_dict()
        out.append((lin.weight.detach().clone(), sorted(sd["param_groups"][0].keys()), list(sd["state"].keys()), scheds[0].state_dict()))
        opt2 = make(nn.Linear(3, 2).parameters())
        opt2.load_state_dict(sd)
        out.append(opt2.state_dict()["param_groups"][0]["lr"])
    lin = nn.Linear(2, 2)
    out.append(_catch(lambda: type(torch.optim.Adam(lin.parameters(), fused=True)).__name__))
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    s1 = torch.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    s2 = torch.optim.lr_scheduler.StepLR(opt, 2)
    ch = torch.optim.lr_scheduler.ChainedScheduler([s1, s2])
    for _ in range(3):
        opt.step()
        ch.step()
    out += [opt.param_groups[0]["lr"], sorted(ch.state_dict().keys()), sorted(s1.state_dict().keys())]
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    seq = torch.optim.lr_scheduler.SequentialLR(opt, [torch.optim.lr_scheduler.ConstantLR(opt, 0.5, 2),
                                                      torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[2])
    for _ in range(4):
        opt.step()
        seq.step()
    out += [opt.param_groups[0]["lr"], sorted(seq.state_dict().keys())]
    from torch.optim.swa_utils import SWALR, AveragedModel
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    swa = SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    for _ in range(3):
        opt.step()
        swa.step()
    out += [opt.param_groups[0]["lr"], sorted(swa.state_dict().keys())]
    am = AveragedModel(lin)
    am.update_parameters(lin)
    out.append(am.n_averaged)
    return out


# Functions whose C implementation replaces them in their module (so no workload runs them):
# (module, qualname) -> argument tuples, called directly.
_PATHS = ["/a/./b/../c//d", "", "../..", "a/b/", "/", "//x", "///x/..", ".", "a/../..", b"/x/../y", b""]
DIRECT = {("posixpath", "normpath"): [(p,) for p in _PATHS] + [(None,)],
          ("operator", "truth"): [(0,), (1,), ([],), ("a",), (None,)],
          ("heapq", "heappush"): [([1, 3, 5], 2), ([], 0)], ("heapq", "heappop"): [([1, 3, 5],), ([],)],
          ("heapq", "heapify"): [([5, 1, 4, 2],)], ("heapq", "heapreplace"): [([1, 3, 5], 4), ([], 1)],
          ("heapq", "heappushpop"): [([1, 3, 5], 4), ([2], 1)], ("bisect", "bisect_left"): [([1, 2, 2, 4], 2), ([1, 2], 3, 0, 1)],
          ("bisect", "bisect_right"): [([1, 2, 2, 4], 2), ([1, 2], 0, 1)], ("bisect", "insort_left"): [([1, 3], 2)],
          ("bisect", "insort_right"): [([1, 3], 3)]}


def _has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


# Corpus module (import name) -> workload. Several modules share one workload where one program
# drives them together.
WORKLOADS = {"textwrap": w_textwrap, "json.encoder": w_json, "json.decoder": w_json, "string": w_string, "shlex": w_shlex,
             "heapq": w_heapq, "bisect": w_bisect, "fnmatch": w_fnmatch, "posixpath": w_posixpath, "colorsys": w_colorsys,
             "statistics": w_statistics, "difflib": w_difflib, "argparse": w_argparse, "ast": w_ast, "inspect": w_inspect,
             "dataclasses": w_dataclasses, "functools": w_functools, "collections": w_collections, "enum": w_enum,
             "contextlib": w_contextlib, "tokenize": w_tokenize_pprint_calendar_gettext, "pathlib": w_pathlib,
             "configparser": w_configparser, "pprint": w_tokenize_pprint_calendar_gettext, "csv": w_csv,
             "calendar": w_tokenize_pprint_calendar_gettext, "asyncio.tasks": w_asyncio, "asyncio.locks": w_asyncio,
             "asyncio.queues": w_asyncio, "typing": w_typing, "copy": w_copy_operator_weakref, "gettext": w_tokenize_pprint_calendar_gettext,
             "ipaddress": w_ipaddress, "fractions": w_fractions, "random": w_random, "traceback": w_traceback,
             "shutil": w_shutil_glob_tempfile, "tempfile": w_shutil_glob_tempfile, "glob": w_shutil_glob_tempfile,
             "operator": w_copy_operator_weakref, "weakref": w_copy_operator_weakref}
if _has_torch():
    for _m in ("nn.functional", "nn.modules.module", "nn.modules.linear", "nn.modules.conv", "nn.modules.activation",
               "nn.modules.normalization", "nn.modules.container", "nn.modules.pooling", "nn.modules.dropout", "nn.modules.loss",
               "nn.modules.rnn", "nn.modules.transformer", "nn.modules.batchnorm", "nn.init"):
        WORKLOADS["torch." + _m] = w_torch_nn
    for _m in ("optim.optimizer", "optim.adam", "optim.adamw", "optim.sgd", "optim.rmsprop", "optim.lr_scheduler", "optim.adagrad",
               "optim.swa_utils", "nn.utils.clip_grad"):
        WORKLOADS["torch." + _m] = w_torch_optim
