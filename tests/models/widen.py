"""The float64 reference of a model that casts to float32 inside forward (tools/model_sweep.py's rule (e)).

Some models hard-code float32 inside forward (`.float()` before a norm or a softmax, `dtype=torch.float32`
factories, `.to(torch.float32)`), so their float64 copy mixes float32 and float64 tensors and fails ("mat1 and
mat2 must have the same dtype"), or fill a default-dtype (float32) tensor with float64's finfo.min (XGLM).
`Widen` is a TorchFunctionMode for the float64 reference only: every such cast or float32 request becomes float64
and the default dtype is float64 while it is on, so the reference is float64 throughout, as the model would
compute it had it been written dtype-generic. It is used only where the plain float64 reference fails.

    with Widen() as w:
        out = model_float64(**inputs_float64)
    w.calls  # {"Tensor.float": 12, "dtype=float32": 3}: what was widened
"""
import torch
from torch.overrides import TorchFunctionMode


class Widen(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = {}

    def __enter__(self):
        # Factories with no dtype (XGLM's torch.full((), torch.finfo(float64).min)) make float64 too.
        self._default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc):
        torch.set_default_dtype(self._default)
        return super().__exit__(*exc)

    def _count(self, what):
        self.calls[what] = self.calls.get(what, 0) + 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.float:
            self._count("Tensor.float")
            return args[0].double()
        if kwargs.get("dtype") is torch.float32:
            kwargs["dtype"] = torch.float64
            self._count("dtype=float32")
        if func in (torch.Tensor.to, torch.Tensor.type, torch.Tensor.new_tensor, torch.Tensor.new_zeros,
                    torch.Tensor.new_ones, torch.Tensor.new_empty, torch.Tensor.new_full) \
                and any(a is torch.float32 for a in args[1:]):
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
            self._count(f"Tensor.{func.__name__}(float32)")
        return func(*args, **kwargs)
