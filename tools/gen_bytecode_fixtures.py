"""Record bytecode fixtures for the C++ decoder tests, from each CPython version's compiler.

For a set of sample functions, writes <name>.<ver>.bin (co_code) and <name>.<ver>.txt (the
expected listing, computed by that version's `dis` module: "offset NAME arg [-> target]").
Run with each supported interpreter:  python tools/gen_bytecode_fixtures.py
"""
import os, subprocess, sys, glob

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "cpp", "data")

PROBE = r'''
import dis, sys, os
SAMPLES = {}
def sample(f):
    SAMPLES[f.__name__] = f
    return f

@sample
def straight(x, y):
    z = x * 2 + y
    return z.relu()

@sample
def loops(xs, n):
    out = []
    for i, x in enumerate(xs):
        if i % 2 == 0 and n > 3:
            out.append(x)
        elif x is None:
            continue
        else:
            out.append(-x)
    while n > 0:
        n -= 1
    return out, [y * 2 for y in out], {k: v for k, v in zip("ab", out)}

@sample
def closures(a, *args, k=1, **kw):
    def inner(b):
        nonlocal a
        a = a + b
        return a
    with open(os.devnull) as f:
        pass
    try:
        inner(k)
    except ValueError as e:
        raise RuntimeError("x") from e
    return inner(1), args[1:3], kw.get("q")

@sample
def big_jumps(x):
    if x:
        @@BIG@@
    return x

class _K:
    def with_super(self, x):
        return super().__init__(), super(_K, self).__class__, x

SAMPLES["with_super"] = _K.with_super

out, ver = sys.argv[1], "%d%d" % sys.version_info[:2]
for name, f in SAMPLES.items():
    code = f.__code__
    open(os.path.join(out, f"{name}.{ver}.bin"), "wb").write(code.co_code)
    lines = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("CACHE", "EXTENDED_ARG"):
            continue
        line = f"{ins.offset} {ins.opname} {ins.arg or 0}"
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            line += f" -> {ins.argval}"
        lines.append(line)
    open(os.path.join(out, f"{name}.{ver}.txt"), "w").write("\n".join(lines) + "\n")
'''

def main():
    pythons = sys.argv[1:] or sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[12].*/bin/python")))
    os.makedirs(OUT, exist_ok=True)
    # a long branch body, so that jumps need EXTENDED_ARG
    probe = PROBE.replace("@@BIG@@", "\n        ".join("x = x + %d" % i for i in range(150)))
    for py in pythons:
        subprocess.check_call([py, "-c", probe, OUT])

if __name__ == "__main__":
    main()
