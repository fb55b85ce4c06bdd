"""What channels-last buys ResNet-18 (fp32, batch 32) in eager on a GPU: NCHW model and input, NHWC
(channels_last) model and input, and an NCHW model fed an NHWC input (ATen converts each weight per
call). Times by CUDA events (gpu_common.cuda_ms_per_call).

    python3 scripts/gpu_layout_probe.py"""
import copy

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

from suite import CASES  # noqa: E402


def main():
    torch.manual_seed(0)
    model, (x,), _ = CASES["resnet18"]("cuda")
    cl = torch.channels_last
    nhwc = copy.deepcopy(model).to(memory_format=cl)
    xc = x.contiguous(memory_format=cl)
    with torch.no_grad():
        ref = model(x)
        for name, m, inp in [("nchw model, nchw input", model, x), ("nhwc model, nhwc input", nhwc, xc),
                             ("nchw model, nhwc input", model, xc), ("nhwc model, nchw input", nhwc, x)]:
            out = m(inp)
            err = ((out - ref).double().norm() / ref.double().norm()).item()
            print(f"{name}: {gpu_common.cuda_ms_per_call(m, (inp,)):.3f} ms  relerr {err:.1e}")


if __name__ == "__main__":
    main()
