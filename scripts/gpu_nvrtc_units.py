"""NVRTC time of generated CUDA sources split into units, compiled on threads (how well NVRTC's
compiles overlap in one process, and what a unit's fixed cost is).

    python3 scripts/gpu_nvrtc_units.py FILE.cu... [--units 1,2,4,8,16] [--arch 90]

Each FILE is a whole generated module (kiln's CUDA prefix header, then kernels that each start
with a `// kernelN (` comment; a CodegenGraph's source is this without the prefix). Per unit count
the kernels are split into contiguous groups of about equal size, each group compiled (prefix +
its kernels) by NVRTC through ctypes (which releases the GIL) on its own thread, and once more
one after another on one thread, to separate the overlap from the per-unit cost."""
import argparse
import ctypes
import glob
import os
import re
import sys
import threading
import time


def load_nvrtc():
    import torch
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    site = os.path.dirname(os.path.dirname(torch.__file__))
    pats = [os.path.join(lib, "libnvrtc.so*"), os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so*"),
            os.path.join(site, "nvidia", "*", "*", "lib", "libnvrtc.so*"), "/usr/local/cuda/lib64/libnvrtc.so*"]
    for pat in pats:
        for path in sorted(glob.glob(pat)):
            if "builtins" in path or "alt" in path:
                continue
            try:
                return ctypes.CDLL(path), path
            except OSError:
                pass
    raise SystemExit("libnvrtc not found")


def compile_one(nv, source, arch):
    prog = ctypes.c_void_p()
    if nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"u.cu", 0, None, None) != 0:
        raise RuntimeError("nvrtcCreateProgram failed")
    opts = (ctypes.c_char_p * 2)(f"--gpu-architecture=sm_{arch}".encode(), b"-std=c++17")
    status = nv.nvrtcCompileProgram(prog, 2, opts)
    size = ctypes.c_size_t()
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    if status != 0:
        raise RuntimeError(f"NVRTC failed with status {status}")
    return size.value


def split(text):
    starts = [m.start() for m in re.finditer(r"^// kernel\d+ \(", text, re.M)]
    if not starts:
        raise SystemExit("no `// kernelN (` markers")
    prefix = text[:starts[0]]
    kernels = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    return prefix, kernels


def units_of(prefix, kernels, n):
    total = sum(len(k) for k in kernels)
    groups, before, last = [], 0, -1
    for k in kernels:
        u = min(n - 1, before * n // total)
        if u != last:
            groups.append(prefix)
            last = u
        groups[-1] += k
        before += len(k)
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--units", default="1,2,4,8,16")
    ap.add_argument("--arch", type=int, default=0)
    a = ap.parse_args()
    nv, path = load_nvrtc()
    arch = a.arch
    if not arch:
        import torch
        major, minor = torch.cuda.get_device_capability()
        arch = major * 10 + minor
    print(f"nvrtc {path}, sm_{arch}, {os.cpu_count()} CPUs")
    for f in a.files:
        prefix, kernels = split(open(f).read())
        t = time.perf_counter()
        compile_one(nv, prefix + kernels[0], arch)  # NVRTC's first use in the process
        print(f"{os.path.basename(f)}: {len(kernels)} kernels, {sum(map(len, kernels))} bytes (prefix {len(prefix)}); "
              f"first compile (prefix + 1 kernel) {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        compile_one(nv, prefix, arch)
        print(f"  prefix alone {time.perf_counter() - t:.3f} s")
        for n in (int(v) for v in a.units.split(",")):
            srcs = units_of(prefix, kernels, min(n, len(kernels)))
            t = time.perf_counter()
            threads = [threading.Thread(target=compile_one, args=(nv, s, arch)) for s in srcs]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            par = time.perf_counter() - t
            t = time.perf_counter()
            each = []
            for s in srcs:
                t1 = time.perf_counter()
                compile_one(nv, s, arch)
                each.append(time.perf_counter() - t1)
            ser = time.perf_counter() - t
            print(f"  {len(srcs):2} units: threads {par:.3f} s, one after another {ser:.3f} s (max unit {max(each):.3f} s)")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
