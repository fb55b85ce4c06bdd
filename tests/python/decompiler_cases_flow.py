"""Hand-written decompiler cases, continued from decompiler_cases.py (which imports this file at its
end, so CASES holds both): layouts of branches, try/finally, with blocks and loops that CPython
3.11/3.12 lay out in special ways, each found in a real function that was refused or rebuilt
wrong. Free of kiln/torch imports, like decompiler_cases.py."""
from decompiler_cases import case

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


# A try whose body is a nested try, with code after both: 3.12 protects the outer body only where
# the nested handler is placed (after the code), so the outer body took in the code after the try
# (enum._proto_member.__set_name__ was refused).
@case(({1: "a"}, 1, True, []), ({1: "a"}, 2, True, [0]), ({1: "a"}, 2, False, [0]), ({1: "a"}, [], True, []),
      ({1: [2]}, [2], True, []))
def try_whose_body_is_a_try(d, v, flag, names):
    names = list(names)
    try:
        try:
            m = d[v]
        except TypeError:
            for n, c in d.items():
                if c == v:
                    m = c
                    break
            else:
                raise KeyError
    except KeyError:
        if flag:
            names.append(v)
    out = []
    for k in names:
        out.append(k)
    return out


# A try/finally around a loop of with blocks (two context managers), ending the function: 3.12
# places the with blocks' handlers after the finally copy's return, where they were walked as code
# after the try (shutil._unpack_zipfile: "unsupported instruction PUSH_EXC_INFO").
@case((["a", "/b", "c"],), ([],), (["x", "bad"],))
def with_blocks_in_a_loop_in_try_finally(names):
    log = []

    def run():
        try:
            for name in names:
                if name.startswith("/"):
                    continue
                with _Ctx(log) as s, _Ctx(log) as t:
                    if name == "bad":
                        raise KeyError(name)
                    log.append((name, s is t))
        finally:
            log.append("closed")
    try:
        run()
    except KeyError:
        log.append("raised")
    return log


# A try/finally in a finally block, ending the function: the exceptional copy of the outer block
# starts with the nested `try:`'s NOP, which the normal copy's matching skipped on one side only,
# and 3.12 places the nested handler after the normal copy's return (asyncio Task.__eager_start
# was refused: "finally block without its normal-exit copy").
@case((1, 2, False), (0, 2, False), (1, 2, True), (0, 2, True))
def finally_in_a_finally(a, b, fail):
    log = []

    def run():
        try:
            log.append(a)
            if fail:
                raise KeyError(a)
        finally:
            try:
                log.append(b)
            finally:
                if a:
                    log.append(1)
                else:
                    log.append(2)
    try:
        run()
    except KeyError:
        log.append("raised")
    return log


# A try/finally ending a loop body, whose finally block is an if around a try/except: 3.12 inverts
# the normal copy's if around its jump back to the loop (POP_JUMP_IF_TRUE over a JUMP_BACKWARD)
# and places the nested handler after the loop (shutil._rmtree_safe_fd was refused: "finally
# block without its normal-exit copy").
@case(([1, 0, 2],), ([],), ([3, "x"],))
def finally_if_try_in_a_loop(items):
    log = []
    for x in items:
        try:
            log.append(x)
        finally:
            if x:
                try:
                    log.append(-x)
                except TypeError as err:
                    log.append(type(err).__name__)
    return log
