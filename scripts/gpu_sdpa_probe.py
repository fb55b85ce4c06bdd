"""Why attention costs more under a compiler than in eager on the bench's hf_llama (an H200 profile:
the cuDNN SDPA kernel 155.8 us per call eager, 295.6 kiln, 278.3 Inductor, the same kernel name):
records the arguments eager passes to F.scaled_dot_product_attention (sizes, strides, keywords),
kiln's ATen graph around its attention (KILN_DEBUG_DIR), and times SDPA alone on eager's
arguments in variants (query made contiguous, key/value repeated instead of enable_gqa, ...) with
the kernels each variant launches.

    python3 scripts/gpu_sdpa_probe.py        (PROBE_DEVICE=cpu: a dry run of everything but the timings)"""
import glob
import os
import re
import tempfile

import gpu_common  # noqa: F401  (kiln and the bench suite on sys.path)
import torch
import torch.nn.functional as F

from suite import CASES  # noqa: E402

DEV = os.environ.get("PROBE_DEVICE", "cuda")


def describe(t):
    return f"{tuple(t.shape)} {t.stride()} {t.dtype}" if isinstance(t, torch.Tensor) else repr(t)


def kernels(fn):
    """gpu_common.kernel_rows of fn() (nothing on a dry run without a GPU)."""
    return gpu_common.kernel_rows(fn, (), iters=5) if DEV == "cuda" else []


def main():
    model, args, _ = CASES["hf_llama"](DEV)
    seen = []
    real = F.scaled_dot_product_attention

    def spy(*a, **k):
        if not seen:
            seen.append((a, dict(k)))
        return real(*a, **k)

    F.scaled_dot_product_attention = spy
    torch.nn.functional.scaled_dot_product_attention = spy
    with torch.no_grad():
        model(*args)
    F.scaled_dot_product_attention = real
    torch.nn.functional.scaled_dot_product_attention = real
    (q, k, v, *rest), kw = seen[0]
    print("eager's SDPA call:", "q", describe(q), "| k", describe(k), "| v", describe(v), "| rest", rest, "| kw",
          {n: describe(x) for n, x in kw.items()})

    dbg = tempfile.mkdtemp(prefix="sdpa_dbg_")
    os.environ["KILN_DEBUG_DIR"] = dbg
    import kiln
    kiln.reset()
    cm = kiln.compile(model)
    with torch.no_grad():
        cm(*args)
        cm(*args)
    for path in glob.glob(os.path.join(dbg, "*", "aten_graph.txt"))[:1]:
        lines = open(path).read().splitlines()
        for i, line in enumerate(lines):
            if "attention" in line:
                ids = set(re.findall(r"%(\d+)\b", line.split("=", 1)[1]))
                print("kiln:", line[:400])
                for prev in lines[max(0, i - 40):i]:
                    m = re.match(r"%(\d+)", prev)
                    if m and m.group(1) in ids:
                        print("   operand:", prev[:300])
                # Everything the bias is computed from (why a causal mask was or was not recognised).
                bias = re.search(r"attn_(?:bias|mask)=%(\d+)", line)
                defs = {}
                for prev in lines[:i]:
                    for out in re.findall(r"%(\d+)", prev.split(" = ", 1)[0]):
                        defs[out] = prev
                todo, ancestry = [bias.group(1)] if bias else [], set()
                while todo:
                    vid = todo.pop()
                    if vid in ancestry or vid not in defs:
                        continue
                    ancestry.add(vid)
                    todo += re.findall(r"%(\d+)", defs[vid].split(" = ", 1)[1].split(" : ")[0])
                for prev in lines[:i]:
                    found = re.match(r"%(\d+)", prev)
                    if found and found.group(1) in ancestry:
                        print("   bias from:", prev[:300])
                break
    with torch.no_grad():
        print("kiln call kernels:")
        for name, us, n in kernels(lambda: cm(*args))[:12]:
            print(f"   {us:8.1f} us x{n:<3} {name[:110]}")

    heads = q.shape[1]
    groups = heads // k.shape[1]
    variants = {
        "eager's arguments": (q, k, v, kw),
        "query contiguous": (q.contiguous(), k, v, kw),
        "key/value repeated, no enable_gqa": (q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                                              {n: x for n, x in kw.items() if n != "enable_gqa"}),
        "all contiguous, repeated": (q.contiguous(), k.repeat_interleave(groups, 1).contiguous(),
                                     v.repeat_interleave(groups, 1).contiguous(),
                                     {n: x for n, x in kw.items() if n != "enable_gqa"}),
        "query in (b, s, h, d) memory": (q.transpose(1, 2).contiguous().transpose(1, 2), k, v, kw),
    }
    with torch.no_grad():
        for name, (qq, kk, vv, kws) in variants.items():
            ms = gpu_common.cuda_ms_per_call(lambda: real(qq, kk, vv, **kws), ()) if DEV == "cuda" else float("nan")
            rows = kernels(lambda: real(qq, kk, vv, **kws))
            print(f"{name:36} {ms * 1e3:8.1f} us per call; q {qq.stride()} k {kk.stride()}; kernels: " +
                  "; ".join(f"{nm[:60]} {us:.1f}" for nm, us, _ in rows[:3]))


if __name__ == "__main__":
    main()
