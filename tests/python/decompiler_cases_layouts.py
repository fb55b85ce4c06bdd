"""Hand-written decompiler cases, continued from decompiler_cases_flow.py (decompiler_cases.py
imports this file at its end, so CASES holds all three): loop and handler layouts CPython 3.12
places apart from the code they belong to, and assignments whose value is stored twice, each
found in a real function that was refused or rebuilt wrong. Free of kiln/torch imports."""
from decompiler_cases import case


# A while loop whose body is a try around an endless loop, left only through its except block:
# 3.12 places the loop's final test after the handler, reached only from it, as
# `<test>; POP_JUMP_IF_FALSE X; JUMP_BACKWARD body; X: JUMP_BACKWARD after-the-loop`
# (heapq.merge was refused: "a jump that is neither break, continue nor the end of a block").
@case(([[1, 4], [2, 3], []],), ([],), ([[5], [6, 7]],))
def while_test_after_a_handler(lists):
    its = [iter(x) for x in lists]
    out = []
    while len(its) > 1:
        try:
            while True:
                out.append(next(its[0]))
                its.append(its.pop(0))
        except StopIteration:
            its.pop(0)
    if its:
        out.extend(its[0])
    return out


# A chained assignment whose first target is a target list (`a, b = s = v`: COPY 1, then the
# unpack): the copy left for the next target was printed as a second `s = v`, evaluating v twice
# (wrong source: difflib.SequenceMatcher.get_matching_blocks, heapq.merge's `... = s = h[0]`).
@case(([(5, 6), ((1, 2), 3), (7, 8), (9, 10)],))
def chained_unpack_assignment(items):
    calls, pool = [], list(items)

    def get():
        calls.append(1)
        return pool.pop()
    a, b = s = get()
    t = (c, d) = get()
    (e, f), g = u = v = get()
    return a, b, s, c, d, t, e, f, g, u, v, len(calls)


# A finally block holding a `while True` loop around a try/except whose body breaks, after a
# body that returns from a nested try/finally (asyncio Condition.wait was refused on 3.12:
# "finally block without its normal-exit copy"). The handler's copy of the block has the await's
# CLEANUP_THROW, the nested handler and the loop's back edge inline, its break jumping over them,
# and a deeper YIELD_VALUE; the normal copy has them placed after the code. The `return True` runs
# both finally copies before its RETURN_CONST (it was printed after the outer try: same behaviour,
# other bytecode).
@case((0, False), (1, False), (3, True), (0, True))
def loop_in_a_finally_after_a_return(fails, fail_body):
    log, left = [], [fails]

    class Cancelled(Exception):
        pass

    async def acquire():
        if left[0]:
            left[0] -= 1
            raise Cancelled(left[0])
        log.append("acquired")

    async def step():
        if fail_body:
            raise KeyError("body")
        log.append("stepped")

    async def wait():
        log.append("released")
        try:
            fut = len(log)
            log.append(fut)
            try:
                await step()
                return True
            finally:
                log.remove(fut)
        finally:
            cancelled = False
            while True:
                try:
                    await acquire()
                    break
                except Cancelled:
                    cancelled = True
            if cancelled:
                raise Cancelled
    co = wait()
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value, log
    except (Cancelled, KeyError) as e:
        return type(e).__name__, log
    raise AssertionError("the coroutine awaited something that suspends")


# A try/except ending a while True body whose except clause falls through (`pass`): the clause
# jumps back to the loop's header, where the body's region ends, and so does the body's normal
# exit; that is where the try ends, not two `continue`s in an except and an else clause (a
# structural difference: weakref.WeakKeyDictionary._commit_removals, json.decoder.JSONArray).
@case(([1, 2, 5, 3],), ([],), ([7, 7],))
def except_pass_ending_a_while_true_body(keys):
    d = {1: "a", 3: "c", 7: "g"}
    pending = list(keys)
    while True:
        try:
            key = pending.pop()
        except IndexError:
            return sorted(d.items())
        try:
            del d[key]
        except KeyError:
            pass


# `try: ...; break` with an except clause that falls through, ending a while True body: 3.11
# jumps from the body over the handler to the loop's exit, the clause back to the header; the
# jump is the body's break, and the clause goes on where the loop body ends (asyncio.all_tasks;
# it was printed as `except: ...; continue` and a `break` after the try). 3.12 places the code
# after the loop at the break instead (printed after the try, inside the loop: same behaviour).
@case((0,), (2,))
def break_ending_a_try_in_a_loop(fails):
    left = [fails]
    log = []
    while True:
        try:
            if left[0]:
                left[0] -= 1
                raise KeyError(left[0])
            log.append("ok")
            break
        except KeyError as e:
            log.append(e.args[0])
    log.append("done")
    return log


# `return x if c else <constant>`: 3.12 returns each branch's value with its own RETURN_VALUE, the
# constant's as `LOAD_CONST; RETURN_VALUE`, which a return statement never compiles to (it was
# printed as `if c: return x`, then the implicit return None: inspect.currentframe, operator.truth).
@case((None, "real"), (1j, "real"), ("s", "upper"))
def return_ternary_with_a_constant(obj, name):
    def first():
        return getattr(obj, name) if hasattr(obj, name) else None

    def second(x):
        if x:
            return len(x) if isinstance(x, str) else 0
        return -1
    return first() is None, second(name), second(""), second(obj), True if obj else False
