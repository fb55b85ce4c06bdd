"""Where the first call's time goes on a CUDA device, each compiler in fresh processes.

    python3 scripts/gpu_first_call.py [--cases relu,many] [--compilers kiln,inductor] [--profile]

Every (case, compiler) runs twice in a new process: cold (an empty cache directory of its own)
and warm (the same directory again). A child reports, in seconds: importing torch, CUDA
initialisation, importing the compiler, compiling and the first call (synchronized) with kiln's own split of
it (capture, backend; per graph trace, lower, codegen, compile or load_cached, load), the second
call, and which heavy modules the first call imported. --profile adds one more cold kiln process
under cProfile and prints its top functions by cumulative time.

Cases written bench:NAME are the bench's models (../shared/bench/suite.py, as `run.py --device
cuda` builds them); as in the bench, eager runs the model once before the timed first call, so
cuDNN's and cuBLAS's first use is not kiln's. --variants runs each case again in other
environments ("KILN_CUDA_UNIT_BYTES=12000", ';' between variants; cold only); --no-warm skips the
warm processes; --profile runs under the last variant's environment, --profile-cases limits it to
some cases."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = os.environ.get("FC_DEVICE", "cuda")
HEAVY = ("sympy", "torch._dynamo", "torch._inductor", "triton", "torch._refs", "torch._decomp", "torch.fx.experimental.symbolic_shapes")


def bench_suite():
    for d in ([os.environ["FC_BENCH"]] if os.environ.get("FC_BENCH") else []) + ["../shared/bench", "shared/bench", "../../shared/bench"]:
        path = os.path.join(ROOT, d)
        if os.path.isfile(os.path.join(path, "suite.py")):
            sys.path.insert(0, path)
            import suite
            return suite
    raise SystemExit("the bench's suite.py was not found")


def case_fn(name, torch):
    if name.startswith("bench:"):
        suite = bench_suite()
        model, args, training = suite.CASES[name[6:]](DEV)
        if training:
            raise SystemExit("bench training cases are not first-call cases here")
        if isinstance(args, suite.Varying):  # shapes that change between calls: the first call's
            args = args[0]
        with torch.no_grad():
            model(*args)  # as the bench's eager reference run: cuDNN / cuBLAS used before kiln's first call
        return model, (lambda: args)
    if name == "relu":
        return (lambda t: (t * 2).relu()), (lambda: (torch.randn(1024, 1024, device=DEV),))
    if name == "many":  # softmaxes along alternating dims and layer norms: one kernel each
        F = torch.nn.functional

        def many(x):
            for i in range(8):
                x = torch.softmax(x * 1.5, dim=i % 2)
                x = F.layer_norm(x + 1, (x.shape[-1],))
            return x
        return many, (lambda: (torch.randn(512, 512, device=DEV),))
    if name == "train":  # a training step's forward and backward (the joint graph, partitioned)
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256), torch.nn.LayerNorm(256)).to(DEV)
        return (lambda x: m(x).square().mean()), (lambda: (torch.randn(64, 256, device=DEV, requires_grad=True),))
    raise SystemExit(f"unknown case {name}")


def first_tensor(out):
    """A model output's tensor (last_hidden_state, a tuple's first item), as the bench judges it."""
    out = getattr(out, "last_hidden_state", out)
    return out[0] if isinstance(out, (tuple, list)) else out


def child(a):
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    if DEV == "cuda":
        torch.cuda.init()
    sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
    torch.empty(1, device=DEV)
    sync()
    t2 = time.perf_counter()
    r = {"import_torch": t1 - t0, "cuda_init": t2 - t1}
    if a.compiler == "kiln":
        import kiln
        from kiln import _codegen
        compile_fn = kiln.compile
    else:
        compile_fn = torch.compile
    t3 = time.perf_counter()
    r["import_compiler"] = t3 - t2
    fn, make = case_fn(a.case, torch)
    args = make()
    sync()
    before = set(sys.modules)
    prof = None
    if a.profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    train = a.case == "train"
    with torch.enable_grad() if train else torch.no_grad():
        t4 = time.perf_counter()  # torch.compile(fn) imports torch._dynamo: part of the first call's wait
        c = compile_fn(fn)
        out = c(*args)
        if train:
            out.backward()
        sync()
        t5 = time.perf_counter()
        if prof:
            prof.disable()
        out2 = c(*args)
        if train:
            out2.backward()
        sync()
        t6 = time.perf_counter()
        ref = fn(*args)
        out, ref = first_tensor(out).detach(), first_tensor(ref).detach()
    r["first_call"] = t5 - t4
    r["second_call"] = t6 - t5
    r["relerr"] = float((out.double() - ref.double()).norm() / ref.double().norm())
    r["imported"] = [m for m in HEAVY if m in sys.modules and m not in before]
    if a.compiler == "kiln":
        s = kiln.stats()
        r["compile_s"] = s.get("compile_s")
        r["graphs"] = [{"status": g.status[:200], "kernels": g.num_kernels, "timings": dict(g.timings)} for g in _codegen.GRAPHS]
    r["process_s"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(r))
    if prof:
        import pstats
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(35)
    del out2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="relu,many")
    ap.add_argument("--compilers", default="kiln,inductor")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-cases", default="", help="comma list: profile only these cases")
    ap.add_argument("--variants", default="", help="';'-separated extra environments, each VAR=VALUE[,VAR=VALUE]")
    ap.add_argument("--no-warm", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--case")
    ap.add_argument("--compiler")
    a = ap.parse_args()
    if a.child:
        return child(a)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = ROOT + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rows = []
    variants = [("", {})] + [(v, dict(kv.split("=", 1) for kv in v.split(","))) for v in a.variants.split(";") if v]
    profiled = set(a.profile_cases.split(",")) if a.profile_cases else None
    for case in a.cases.split(","):
        for comp in a.compilers.split(","):
            for vname, venv in variants:
                cache = tempfile.mkdtemp(prefix=f"fc_{comp}_")
                e = dict(env, KILN_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"), **venv)
                prof_here = a.profile and comp == "kiln" and (profiled is None or case in profiled) and vname == variants[-1][0]
                runs = [("cold", False)] + ([] if a.no_warm or vname else [("warm", False)]) + ([("profile", True)] if prof_here else [])
                for label, prof in runs:
                    if prof:  # cold again, under cProfile
                        cache = tempfile.mkdtemp(prefix=f"fc_{comp}_p_")
                        e = dict(e, KILN_CACHE_DIR=cache)
                    cmd = [sys.executable, __file__, "--child", "--case", case, "--compiler", comp] + (["--profile"] if prof else [])
                    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)
                    res = None
                    for line in p.stdout.splitlines():
                        if line.startswith("RESULT "):
                            res = json.loads(line[7:])
                    tag = f"{label}{'[' + vname + ']' if vname else ''}"
                    if prof or res is None:
                        print(f"---- {case} {comp} {tag}: exit {p.returncode}\n{p.stdout[-6000:]}\n{p.stderr[-3000:]}")
                    if res is None:
                        continue
                    print(f"{case} {comp} {tag} " + json.dumps(res))
                    rows.append((case, comp, tag, res))
    print("\ncase  compiler label    import_torch cuda_init import_comp first_call second_call  imported")
    for case, comp, label, r in rows:
        print(f"{case:5} {comp:8} {label:7} {r['import_torch']:12.3f} {r['cuda_init']:9.3f} {r['import_compiler']:11.3f} "
              f"{r['first_call']:10.3f} {r['second_call']:11.4f}  {','.join(r['imported'])}")


if __name__ == "__main__":
    main()
