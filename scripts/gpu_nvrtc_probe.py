"""Which spellings of a device-side assertion NVRTC accepts here (the prefix header uses one):
compiles small kernels through libnvrtc (ctypes) and prints OK or the log for each.

    python3 scripts/gpu_nvrtc_probe.py"""
import ctypes
import glob
import os

import torch

BODY = 'extern "C" __global__ void k(long long* p, long long n) { if (p[0] >= n) %s; }\n'
CASES = {
    "assertfail declared (device, decltype size)": 'extern "C" __device__ void __assertfail(const char*, const char*, unsigned int, const char*, decltype(sizeof(0)));\n'
    + BODY % '__assertfail("m", "f", 0, "fn", 1)',
    "assertfail undeclared": BODY % '__assertfail("m", "f", 0, "fn", 1)',
    "assert_fail undeclared": BODY % '__assert_fail("m", "f", 0, "fn")',
    "trap": BODY % "__trap()",
}


def main():
    libs = []
    for d in [os.path.join(os.path.dirname(torch.__file__), "lib")] + glob.glob("/usr/local/cuda*/lib64") + glob.glob(
            os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib")):
        libs += glob.glob(os.path.join(d, "libnvrtc.so*"))
    print("nvrtc candidates:", libs[:4])
    nv = ctypes.CDLL(libs[0])
    for name, src in CASES.items():
        prog = ctypes.c_void_p()
        nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"probe.cu", 0, None, None)
        opts = (ctypes.c_char_p * 2)(b"--gpu-architecture=sm_90", b"-std=c++17")
        r = nv.nvrtcCompileProgram(prog, 2, opts)
        n = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nv.nvrtcGetProgramLog(prog, log)
        print(f"{name}: {'OK' if r == 0 else 'FAILED ' + str(r)} {log.value.decode()[:300]}")
        nv.nvrtcDestroyProgram(ctypes.byref(prog))


if __name__ == "__main__":
    main()
