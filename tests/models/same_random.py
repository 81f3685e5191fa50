"""The same random numbers on every device and dtype (tools/model_sweep.py's rule (c); issue 29).

Some models draw random numbers inside forward even in eval mode (EnCodec/VITS/UnivNet noise, RNN-T/TDT
decoders, VibeVoice's acoustic tokenizer...). tpu's generator is not CPU's, and float64's draws are not
float32's, so such a forward cannot be compared as it is. `SameRandom` is a TorchFunctionMode that serves every
random factory and in-place random fill from a CPU torch.Generator seeded by the call's index within the
forward (`seed + index`), drawn in float32 (float64 for a float64 request is the float32 draw widened, so the
float64 reference sees the very numbers float32 does; an affine fill such as normal_(mean, std) is applied in
float64, then rounded to the tensor's dtype) on CPU, then converted to the requested dtype and device.
Draws that depend on data (bernoulli(p), dropout, multinomial) are made from CPU uniforms of the data's shape
and compared with the data on its own device (u < p), so only a near-tie of p with a uniform could differ.

    with SameRandom(seed=0) as rng:
        out = model(**inputs)
    rng.calls  # {"torch.randn": 3, "Tensor.normal_": 1, ...}: what was replaced

Intercepted: torch.rand/randn/randint/rand_like/randn_like/randint_like/randperm/normal/bernoulli/multinomial/
poisson, Tensor.uniform_/normal_/bernoulli_/exponential_/random_/geometric_/log_normal_/cauchy_ (and the
Tensor.bernoulli/multinomial methods), F.dropout/dropout1d/2d/3d/alpha_dropout/feature_alpha_dropout and
torch.dropout/native functional forms in training. Anything else random (a C++ op drawing internally) is not
seen: the evidence check in the sweep (two runs under different global seeds equal with the mode) catches it.
"""
import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_FLOAT = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _size(args, kwargs):
    """The size of a factory call: size=..., a single tuple/list/Size, or the ints themselves."""
    if "size" in kwargs:
        s = kwargs["size"]
        return tuple(s) if isinstance(s, (tuple, list, torch.Size)) else (s,)
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return tuple(args[0])
    return tuple(int(a) for a in args)


def _name(func):
    q = getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func))
    mod = getattr(func, "__module__", "") or ""
    if q.startswith("TensorBase.") or q.startswith("Tensor."):
        return "Tensor." + q.split(".", 1)[1]
    if mod.startswith("torch.nn.functional"):
        return "F." + q
    return "torch." + getattr(func, "__name__", q)


class SameRandom(TorchFunctionMode):
    """Serve random draws from CPU generators seeded by call index (see the module docstring)."""

    def __init__(self, seed=0):
        super().__init__()
        self.seed = seed
        self.index = 0
        self.calls = {}
        T = torch.Tensor
        self._handlers = {
            torch.rand: self._rand, torch.randn: self._randn, torch.randint: self._randint,
            torch.rand_like: self._rand_like, torch.randn_like: self._randn_like,
            torch.randint_like: self._randint_like, torch.randperm: self._randperm,
            torch.normal: self._normal, torch.bernoulli: self._bernoulli, T.bernoulli: self._bernoulli,
            torch.multinomial: self._multinomial, T.multinomial: self._multinomial, torch.poisson: self._poisson,
            T.uniform_: self._uniform_, T.normal_: self._normal_, T.bernoulli_: self._bernoulli_,
            T.exponential_: self._exponential_, T.random_: self._random_, T.geometric_: self._geometric_,
            T.log_normal_: self._log_normal_, T.cauchy_: self._cauchy_,
            F.dropout: self._dropout, F.dropout1d: self._dropout_channels, F.dropout2d: self._dropout_channels,
            F.dropout3d: self._dropout_channels, F.alpha_dropout: self._alpha_dropout,
            F.feature_alpha_dropout: self._alpha_dropout, torch.dropout: self._torch_dropout,
            torch.alpha_dropout: self._torch_alpha_dropout,
        }

    def reset(self):
        """Back to the first call's seed (before each forward), keeping the tally."""
        self.index = 0

    # ---- plumbing ----
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        h = self._handlers.get(func)
        if h is None:
            return func(*args, **kwargs)
        kwargs.pop("generator", None)
        before = self.index
        out = h(*args, **kwargs)
        if self.index != before:  # drew something (dropout in eval mode draws nothing)
            name = _name(func)
            self.calls[name] = self.calls.get(name, 0) + 1
        return out

    def _gen(self):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.index)
        self.index += 1
        return g

    @staticmethod
    def _out(t, dtype, device, requires_grad=False, out=None):
        t = t.to(dtype=dtype) if dtype is not None else t
        t = t.to(device) if device is not None else t
        if out is not None:
            with torch.no_grad():
                out.resize_(t.shape).copy_(t)
            return out
        if requires_grad:
            t.requires_grad_(True)
        return t

    def _draw(self, kind, shape, **kw):
        """float32 (or int64) draws on CPU."""
        g = self._gen()
        if kind == "rand":
            return torch.rand(shape, generator=g)
        if kind == "randn":
            return torch.randn(shape, generator=g)
        if kind == "randint":
            return torch.randint(kw["low"], kw["high"], shape, generator=g)
        raise ValueError(kind)

    @staticmethod
    def _fdtype(dtype):
        return dtype if dtype is not None else torch.get_default_dtype()

    # ---- factories ----
    def _factory(self, kind, args, kwargs, **kw):
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        rg, out = kwargs.pop("requires_grad", False), kwargs.pop("out", None)
        for k in ("layout", "pin_memory", "names", "memory_format"):
            kwargs.pop(k, None)
        shape = _size(args, kwargs)
        t = self._draw(kind, shape, **kw)
        if dtype is None:
            dtype = out.dtype if out is not None else (torch.int64 if kind == "randint" else torch.get_default_dtype())
        return self._out(t, dtype, device, rg, out)

    def _rand(self, *args, **kwargs):
        return self._factory("rand", args, kwargs)

    def _randn(self, *args, **kwargs):
        return self._factory("randn", args, kwargs)

    def _randint(self, *args, **kwargs):
        low = kwargs.pop("low", None)
        high = kwargs.pop("high", None)
        args = list(args)
        if high is None:
            if len(args) >= 3 or (len(args) == 2 and not isinstance(args[1], (tuple, list, torch.Size))):
                low, high, args = args[0], args[1], args[2:]
            else:
                low, high, args = 0, args[0], args[1:]
        low = 0 if low is None else low
        return self._factory("randint", tuple(args), kwargs, low=int(low), high=int(high))

    def _like(self, kind, x, kwargs, **kw):
        dtype = kwargs.pop("dtype", None) or x.dtype
        device = kwargs.pop("device", None) or x.device
        t = self._draw(kind, tuple(x.shape), **kw)
        return self._out(t, dtype, device, kwargs.pop("requires_grad", False))

    def _rand_like(self, x, **kwargs):
        return self._like("rand", x, kwargs)

    def _randn_like(self, x, **kwargs):
        return self._like("randn", x, kwargs)

    def _randint_like(self, x, *args, **kwargs):
        low = kwargs.pop("low", None)
        high = kwargs.pop("high", None)
        if high is None:
            low, high = (args[0], args[1]) if len(args) >= 2 else (0, args[0])
        return self._like("randint", x, kwargs, low=int(low or 0), high=int(high))

    def _randperm(self, n, **kwargs):
        t = torch.randperm(int(n), generator=self._gen())
        return self._out(t, kwargs.get("dtype") or torch.int64, kwargs.get("device"),
                         kwargs.get("requires_grad", False), kwargs.get("out"))

    def _normal(self, mean=0.0, std=1.0, size=None, **kwargs):
        out = kwargs.pop("out", None)
        if isinstance(mean, torch.Tensor) or isinstance(std, torch.Tensor):
            ref = mean if isinstance(mean, torch.Tensor) else std
            shape = torch.broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, torch.Tensor)))
            z = self._draw("randn", tuple(shape)).to(dtype=ref.dtype, device=ref.device)
            r = mean + std * z
            return self._out(r, None, None, out=out)
        t = self._draw("randn", tuple(size)) * std + mean
        return self._out(t, kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device"),
                         kwargs.get("requires_grad", False), out)

    def _uniform_u(self, x):
        """CPU float32 uniforms of x's shape, on x's device and dtype (float32 for a non-float x)."""
        dt = x.dtype if x.dtype in _FLOAT else torch.float32
        return self._draw("rand", tuple(x.shape)).to(dtype=dt, device=x.device)

    def _bernoulli(self, x, p=None, **kwargs):
        out = kwargs.pop("out", None)
        probs = x if p is None else torch.full_like(x, float(p), dtype=torch.float32)
        r = (self._uniform_u(probs) < probs).to(x.dtype)
        return self._out(r, None, None, out=out)

    def _multinomial(self, probs, num_samples, replacement=False, **kwargs):
        # Gumbel-max (without replacement: top-k of log p + Gumbel) with CPU-drawn Gumbel noise, on probs' device.
        p = probs.float() if probs.dtype not in (torch.float32, torch.float64) else probs
        logp = torch.log(p / p.sum(-1, keepdim=True))
        if replacement:
            shape = (*p.shape[:-1], num_samples, p.shape[-1])
            u = self._draw("rand", shape).to(dtype=p.dtype, device=p.device)
            gumbel = -torch.log(-torch.log(u.clamp_min(1e-20)).clamp_min(1e-20))
            r = (logp.unsqueeze(-2) + gumbel).argmax(-1)
        else:
            u = self._uniform_u(p)
            gumbel = -torch.log(-torch.log(u.clamp_min(1e-20)).clamp_min(1e-20))
            r = (logp + gumbel).topk(num_samples, -1).indices
        return self._out(r, None, None, out=kwargs.get("out"))

    def _poisson(self, rates, **kwargs):
        r = torch.poisson(rates.detach().double().cpu(), generator=self._gen())
        return r.to(dtype=rates.dtype, device=rates.device)

    # ---- in-place fills ----
    def _fill(self, x, t):
        with torch.no_grad():
            x.copy_(t.to(dtype=x.dtype, device=x.device))
        return x

    def _uniform_(self, x, a=0.0, b=1.0, **kwargs):
        a, b = kwargs.get("from", a), kwargs.get("to", b)
        return self._fill(x, self._draw("rand", tuple(x.shape)).double() * (b - a) + a)

    def _normal_(self, x, mean=0.0, std=1.0, **kwargs):
        return self._fill(x, self._draw("randn", tuple(x.shape)).double() * std + mean)

    def _bernoulli_(self, x, p=0.5, **kwargs):
        u = self._uniform_u(x)
        probs = p if isinstance(p, torch.Tensor) else float(p)
        return self._fill(x, (u < probs))

    def _exponential_(self, x, lambd=1.0, **kwargs):
        u = self._draw("rand", tuple(x.shape)).double()
        return self._fill(x, -torch.log1p(-u) / lambd)

    def _geometric_(self, x, p, **kwargs):
        u = self._draw("rand", tuple(x.shape)).double()
        return self._fill(x, torch.ceil(torch.log1p(-u) / math.log1p(-p)).clamp_min(1))

    def _log_normal_(self, x, mean=1.0, std=2.0, **kwargs):
        return self._fill(x, torch.exp(self._draw("randn", tuple(x.shape)).double() * std + mean))

    def _cauchy_(self, x, median=0.0, sigma=1.0, **kwargs):
        u = self._draw("rand", tuple(x.shape)).double()
        return self._fill(x, median + sigma * torch.tan(math.pi * (u - 0.5)))

    def _random_(self, x, *args, **kwargs):
        low, high = kwargs.get("from", 0), kwargs.get("to", None)
        if len(args) == 1:
            high = args[0]
        elif len(args) >= 2:
            low, high = args[0], args[1]
        if high is None:
            high = 2 ** 24 if x.dtype in _FLOAT else torch.iinfo(x.dtype).max
        return self._fill(x, self._draw("randint", tuple(x.shape), low=int(low), high=int(high)))

    # ---- dropout ----
    def _keep(self, x, p, shape=None):
        u = self._draw("rand", tuple(shape if shape is not None else x.shape)).to(device=x.device)
        return (u >= p).to(x.dtype)

    def _dropout(self, x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        r = x * self._keep(x, p) / (1 - p) if p < 1 else x * 0
        return x.copy_(r.detach()) if inplace else r

    def _torch_dropout(self, x, p, train):
        return self._dropout(x, p, train)

    def _dropout_channels(self, x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        shape = (*x.shape[:2], *([1] * (x.dim() - 2))) if x.dim() > 2 else x.shape
        r = x * self._keep(x, p, shape) / (1 - p) if p < 1 else x * 0
        return x.copy_(r.detach()) if inplace else r

    def _alpha_dropout(self, x, p=0.5, training=False, inplace=False):
        if not training or p == 0:
            return x
        alpha_p = -1.7580993408473766
        keep = self._keep(x, p)
        a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
        b = -a * alpha_p * p
        r = (x * keep + alpha_p * (1 - keep)) * a + b
        return x.copy_(r.detach()) if inplace else r

    def _torch_alpha_dropout(self, x, p, train):
        return self._alpha_dropout(x, p, train)
