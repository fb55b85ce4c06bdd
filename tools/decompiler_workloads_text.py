"""Workloads of the decompiler corpus's behaviour check for the text and number modules of the
standard library (textwrap, json, string, shlex, heapq, bisect, fnmatch, posixpath, colorsys,
statistics, difflib, argparse, ast, configparser, csv, ipaddress, fractions, random, tokenize,
pprint, calendar, gettext); the registry and what a workload must return are in
tools/decompiler_workloads.py."""
import io
import os


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
