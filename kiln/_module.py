"""CompiledModule: what kiln.compile(module) returns.

It shares the original module's parameters, buffers and submodules (the same dict objects), so
state_dict keys, parameters(), train()/eval() and attribute access behave as on the original;
calling it runs the original module through kiln (its forward is captured by the frame hook).
"""
import torch

_SHARED = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_state_dict_hooks",
           "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


class CompiledModule(torch.nn.Module):
    def __init__(self, mod: torch.nn.Module, compiled_call):
        super().__init__()
        for k in _SHARED:
            if k in mod.__dict__:
                self.__dict__[k] = mod.__dict__[k]
        self.__dict__["_orig_mod"] = mod
        self.__dict__["_kiln_call"] = compiled_call

    @property
    def training(self):
        orig = self.__dict__.get("_orig_mod")
        return orig.training if orig is not None else True

    @training.setter
    def training(self, value):
        orig = self.__dict__.get("_orig_mod")
        if orig is not None:
            orig.training = value

    def __call__(self, *args, **kwargs):
        return self.__dict__["_kiln_call"](*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self.__dict__["_kiln_call"](*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name, value):
        if name == "training" or isinstance(value, (torch.nn.Parameter, torch.nn.Module)):
            super().__setattr__(name, value)
        else:
            setattr(self.__dict__["_orig_mod"], name, value)

    # Container protocols of the original (Sequential, ModuleList, ModuleDict).
    def __getitem__(self, idx):
        return self.__dict__["_orig_mod"][idx]

    def __len__(self):
        return len(self.__dict__["_orig_mod"])

    def __bool__(self):
        # Without this, truth testing falls back to __len__ and raises for modules that have none.
        return bool(self.__dict__["_orig_mod"])

    def __iter__(self):
        return iter(self.__dict__["_orig_mod"])

    def __repr__(self):
        return f"CompiledModule({self.__dict__['_orig_mod']!r})"
