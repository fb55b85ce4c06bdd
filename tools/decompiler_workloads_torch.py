"""Workloads of the decompiler corpus's behaviour check for torch.nn and torch.optim (imported only
where torch is installed); the registry is in tools/decompiler_workloads.py."""
from decompiler_workloads_text import _catch


def w_torch_nn():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    out = []
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0),
                      nn.Linear(4 * 4 * 4, 10), nn.LayerNorm(10), nn.GELU())
    x = torch.randn(2, 3, 8, 8)
    y = m(x)
    out.append(y.detach())
    out.append([n for n, _ in m.named_modules()])
    out.append([n for n, _ in m.named_parameters()])
    out.append(sorted(m.state_dict().keys()))
    m2 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0),
                       nn.Linear(4 * 4 * 4, 10), nn.LayerNorm(10), nn.GELU())
    r = m2.load_state_dict(m.state_dict())
    out.append((r.missing_keys, r.unexpected_keys))
    bad = dict(m.state_dict())
    bad["extra"] = torch.zeros(1)
    out.append(_catch(m2.load_state_dict, bad))
    out.append(str(m2.load_state_dict(bad, strict=False)))
    out.append(str(m))
    for mode in ("nearest", "bilinear", "bicubic", "area"):
        out.append(F.interpolate(x, scale_factor=1.5, mode=mode, **({} if mode in ("nearest", "area") else {"align_corners": False})))
    out.append(F.interpolate(x, size=(4, 5)))
    out.append(_catch(F.interpolate, x, size=(4, 5), scale_factor=2))
    rnn = nn.LSTM(4, 5, num_layers=2, batch_first=True)
    out.append(rnn(torch.randn(2, 3, 4))[0].detach())
    out.append(rnn._weights_have_changed() if hasattr(rnn, "_weights_have_changed") else None)
    tr = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    out.append(tr(torch.randn(2, 3, 8)).detach())
    out.append([F.cross_entropy(y, torch.tensor([1, 2])), F.mse_loss(y, torch.zeros_like(y)), F.softmax(y, -1).sum(-1)])
    out.append(m._slow_forward(x).detach() if hasattr(m, "_slow_forward") else None)
    return out


def w_torch_optim():
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    out = []
    for make in (lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True, foreach=False), lambda p: torch.optim.AdamW(p, foreach=False),
                 lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, foreach=False),
                 lambda p: torch.optim.RMSprop(p, centered=True, momentum=0.5, foreach=False), lambda p: torch.optim.Adagrad(p, foreach=False),
                 lambda p: torch.optim.Adam(p, lr=0.01, foreach=False, weight_decay=0.1, maximize=True)):
        torch.manual_seed(1)
        lin = nn.Linear(3, 2)
        opt = make(lin.parameters())
        scheds = [torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e)]
        for _ in range(3):
            opt.zero_grad()
            lin(torch.randn(4, 3)).pow(2).sum().backward()
            opt.step()
            for s in scheds:
                s.step()
        sd = opt.state_dict()
        out.append((lin.weight.detach().clone(), sorted(sd["param_groups"][0].keys()), list(sd["state"].keys()), scheds[0].state_dict()))
        opt2 = make(nn.Linear(3, 2).parameters())
        opt2.load_state_dict(sd)
        out.append(opt2.state_dict()["param_groups"][0]["lr"])
    lin = nn.Linear(2, 2)
    out.append(_catch(lambda: type(torch.optim.Adam(lin.parameters(), fused=True)).__name__))
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    s1 = torch.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    s2 = torch.optim.lr_scheduler.StepLR(opt, 2)
    ch = torch.optim.lr_scheduler.ChainedScheduler([s1, s2])
    for _ in range(3):
        opt.step()
        ch.step()
    out += [opt.param_groups[0]["lr"], sorted(ch.state_dict().keys()), sorted(s1.state_dict().keys())]
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    seq = torch.optim.lr_scheduler.SequentialLR(opt, [torch.optim.lr_scheduler.ConstantLR(opt, 0.5, 2),
                                                      torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[2])
    for _ in range(4):
        opt.step()
        seq.step()
    out += [opt.param_groups[0]["lr"], sorted(seq.state_dict().keys())]
    from torch.optim.swa_utils import SWALR, AveragedModel
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    swa = SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    for _ in range(3):
        opt.step()
        swa.step()
    out += [opt.param_groups[0]["lr"], sorted(swa.state_dict().keys())]
    am = AveragedModel(lin)
    am.update_parameters(lin)
    out.append(am.n_averaged)
    return out


# Functions whose C implementation replaces them in their module (so no workload runs them):
# (module, qualname) -> argument tuples, called directly.
