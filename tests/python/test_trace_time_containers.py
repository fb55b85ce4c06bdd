"""Sets, Counters and defaultdicts of Python values made inside a compiled function are captured
(built for real as trace-time values), and each call hands back its own copy of them."""
import collections

import torch

import kiln
from conftest import assert_same, check


def x1():
    return (torch.randn(4, 8),)


def test_set_construct_add_membership():
    def fn(x):
        seen = set()
        out = x
        for k in (1, 2, 1, 3, 2):
            if k in seen:
                continue
            seen.add(k)
            out = out + k
        return out, len(seen), sorted(set(x.shape))
    check(fn, x1)


def test_set_methods_and_algebra():
    def fn(x):
        s = set(range(5))
        s.discard(2)
        s.update([7, 8])
        s.remove(0)
        a, b = {1, 2, 3}, {2, 3, 4}
        u = a.union(b) | {9}
        return x * len(s) + sum(a & b) - sum(a - b), s, sorted(a ^ b), u, a.intersection(b), a.difference(b)
    check(fn, x1)


def test_set_comprehension_and_frozenset():
    def fn(x):
        s = {i % 3 for i in range(10)}
        return x + max(s), frozenset(s)
    check(fn, x1)


def test_dict_keys_view_set_ops():
    def fn(x):
        d = {"a": 1, "b": 2, "c": 3}
        common = d.keys() & {"b", "c", "z"}
        rest = d.keys() - {"a"}
        return x * len(common), sorted(common), sorted(rest), "a" in d.keys()
    check(fn, x1)


def test_dict_or_operator():
    def fn(x, y):
        d = {"a": x} | {"b": y}
        d |= {"c": x * y}
        return d
    check(fn, lambda: (torch.randn(3), torch.randn(3)))


def test_returned_set_is_a_new_object_each_call():
    def fn(x):
        s = {1, 2}
        s.add(x.shape[0])
        return x + 1, s
    compiled = kiln.compile(fn)
    _, s1 = compiled(torch.randn(4))
    s1.add(99)  # the caller's copy: the next call must not see it
    _, s2 = compiled(torch.randn(4))
    assert s2 == {1, 2, 4} and s1 is not s2
    assert kiln.stats()["graphs"] == 1 and kiln.stats()["graph_breaks"] == 0


def test_counter_and_defaultdict_int():
    def fn(x):
        c = collections.Counter("abracadabra")
        (top, n), = c.most_common(1)
        counts = collections.defaultdict(int)
        for d in x.shape:
            counts[d] += 1
        c2 = collections.Counter()
        for name in ["w", "b", "w", "w"]:
            c2[name] += 1
        c2.update({"b": 2})
        return x * n * counts[4] + c2["w"], top, c["z"], dict(counts), sorted(c2.items()), c2
    check(fn, x1)


def test_in_place_set_operator_on_a_global_set_is_not_done_at_capture():
    G = {1}

    def fn(x):
        s = G
        s |= {x.shape[0]}
        return x * len(s)
    compiled = kiln.compile(fn)
    for _ in range(2):
        x = torch.randn(4)
        G.clear()
        G.add(1)
        expected = fn(x)
        G.clear()
        G.add(1)
        assert_same(compiled(x), expected)
        assert G == {1, 4}


def test_deque_method_live_at_a_break_does_not_alias_a_copy():
    def fn(x):
        q = collections.deque()
        q.extend(x.unbind(0))  # holds tensors: not a trace-time value, a break
        out = torch.zeros(8)
        while q:
            out = out + q.pop()
        return out
    check(fn, x1, graphs=None, breaks=None)


def test_deque_of_tensors_append_maxlen_popleft_rotate_extend():
    def fn(x):
        q = collections.deque(maxlen=2)
        for row in x:
            q.append(row)
        r = collections.deque([x, x * 2])
        r.appendleft(x - 1)
        a = r.popleft()
        r.rotate(1)
        s = collections.deque()
        s.extend(x.unbind(0))
        out = torch.zeros(8)
        while s:
            out = out + s.pop()
        return q[0] + q[-1], len(q), a + r[0] - r.pop(), out
    check(fn, x1)


def test_returning_a_deque_breaks_cleanly():
    def fn(x):
        q = collections.deque([x, x + 1], maxlen=3)
        q.appendleft(x * 2)
        return q
    compiled = kiln.compile(fn)
    for _ in range(2):
        x = torch.randn(3)
        got, want = compiled(x), fn(x)
        assert type(got) is collections.deque and got.maxlen == 3
        assert all(torch.equal(a, b) for a, b in zip(got, want)) and len(got) == len(want)


def test_ordereddict_of_tensors_move_to_end_popitem():
    def fn(x):
        d = collections.OrderedDict()
        d["a"] = x
        d["b"] = x * 2
        d["c"] = x * 3
        d.move_to_end("a")
        d.move_to_end("c", last=False)
        first = d.popitem(last=False)
        e = d.copy()
        e["z"] = x - 1
        return list(d.keys()), sum(d.values()), first, e, isinstance(e, collections.OrderedDict)
    check(fn, x1)


def test_returned_ordereddict_keeps_its_type_and_order():
    def fn(x):
        d = collections.OrderedDict([("k", x), ("j", x + 1)])
        d.move_to_end("k")
        return d
    check(fn, x1)


def test_defaultdict_list_of_tensors_and_returned_defaultdict():
    def fn(x):
        groups = collections.defaultdict(list)
        for i, row in enumerate(x):
            groups[i % 2].append(row)
        counts = collections.defaultdict(int)
        for d in x.shape:
            counts[d] += 1
        return {k: torch.stack(v).sum(0) for k, v in groups.items()}, counts, "missing" in counts, counts.get(99)
    check(fn, x1)
    compiled = kiln.compile(fn)
    _, c, _, _ = compiled(torch.randn(4, 8))
    assert type(c) is collections.defaultdict and c.default_factory is int and c[123] == 0
