"""kiln's main job on a bundled example: compile a small GPT-style model with kiln, then print
eager vs compiled results, timings and what kiln captured."""
import math
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kiln  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    def __init__(self, vocab=512, d=128, heads=4, layers=4, ctx=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def bench(fn, *args, iters=20):
    for _ in range(3):
        fn(*args)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2] * 1e3


def main():
    torch.manual_seed(0)
    model = TinyGPT().eval()
    idx = torch.randint(0, 512, (2, 64))
    compiled = kiln.compile(model)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = compiled(idx)
        first = time.perf_counter() - t0
        ref = model(idx)
        fresh = torch.randint(0, 512, (2, 64))
        err = ((compiled(fresh) - model(fresh)).norm() / model(fresh).norm()).item()
        eager_ms, kiln_ms = bench(model, idx), bench(compiled, idx)
    s = kiln.stats()
    print(f"output shape           {tuple(out.shape)}")
    print(f"max |compiled - eager| {(out - ref).abs().max().item():.3e}   rel. error on fresh input {err:.3e}")
    print(f"first call (capture)   {first * 1e3:.1f} ms  (capture {s['compile_s']['capture'] * 1e3:.1f} ms)")
    print(f"steady state           eager {eager_ms:.2f} ms   kiln {kiln_ms:.2f} ms")
    print(f"graphs {s['graphs']}  graph breaks {s['graph_breaks']}  frames compiled {s['frames_compiled']}  "
          f"recompiles {s['recompiles']}  cache hits {s['cache_hits']}")
    rec = s["graph_records"][0]
    print(f"captured graph: {rec['ops']} ops, {rec['inputs']} inputs, {rec['guard_count']} guards, "
          f"{rec['inlined_functions']} inlined calls, backend {rec['backend']}")
    print("backend note:", s["kiln_backend"])
    print("first lines of the captured graph:")
    print("\n".join(line[:150] for line in rec["code"].splitlines()[:12]))
    assert err < 1e-4, "compiled output differs from eager"


if __name__ == "__main__":
    main()
