"""Which c10d backend a tpu tensor gets when the script named none, or named a CPU/CUDA one.

c10d turns the `backend` string of `init_process_group` / `new_group` into a device -> backend map
(`distributed_c10d.BackendConfig`). Out-of-tree devices only get a say through
`Backend.register_backend(devices=...)`, which covers `"tpu_dist"`, `"cpu:gloo,tpu:tpu_dist"` and the
accelerator's entry in `default_device_backend_map`, but not:

- no backend (`"undefined"`): the map is `{tpu: tpu_dist}` while c10d still marks GLOO as the group's
  default backend type, so DDP's constructor fails ("Could not find backend type 1 ... gloo");
- `"gloo"`: the map is gloo's capability (cpu, cuda), so tpu tensors have no backend at all, where CUDA
  tensors work with gloo;
- `"nccl"` on a host without CUDA: "Distributed package doesn't have NCCL built in" says nothing of tpu.

c10d has no public lever for these, so `install()` swaps the module's `BackendConfig` for a subclass
that only edits the map it produced: undefined and gloo groups get `cpu: gloo` and `tpu: tpu_dist`
(what `"cpu:gloo,tpu:tpu_dist"` gives), and a bare "nccl" that cannot run raises naming tpu_dist.
Every other string ("tpu_dist", "cpu:gloo", "cpu:gloo,tpu:tpu_dist", custom backends) is untouched,
and `dist.get_backend()` still answers the name the script passed.
"""
import torch
from torch.distributed import distributed_c10d as c10d

from .. import _plugins

_BaseConfig = c10d.BackendConfig


def _tpu_present() -> bool:
    # Plugin files only (as for accelerate's default): tpu is there to be used by this process.
    return bool(_plugins.candidates())


def _nccl_usable() -> bool:
    return c10d.is_nccl_available() and torch.cuda.is_available()


class TpuAwareBackendConfig(_BaseConfig):
    """`distributed_c10d.BackendConfig` with tpu tensors routed to tpu_dist under undefined/gloo."""

    def __init__(self, backend):
        name = str(backend).lower()
        if name == c10d.Backend.NCCL and not _nccl_usable() and _tpu_present():
            raise RuntimeError(
                "torch_tpu: backend 'nccl' needs CUDA GPUs and a PyTorch built with NCCL, which this process "
                "lacks; tpu tensors use backend 'tpu_dist': init_process_group('tpu_dist'), or "
                "'cpu:gloo,tpu:tpu_dist' for CPU tensors as well (or no backend at all)")
        super().__init__(backend)
        if name not in (c10d.Backend.UNDEFINED, c10d.Backend.GLOO) or not _tpu_present():
            return
        m = dict(self.device_backend_map)
        if name == c10d.Backend.UNDEFINED and "tpu" not in m:
            return  # the accelerator is not tpu (no plugin could start): c10d's choice stands
        if "cuda" in m and not torch.cuda.is_available():
            del m["cuda"]  # no CUDA tensors can exist; a second gloo instance would only cost a rendezvous
        m.pop("tpu", None)
        # cpu first, as in "cpu:gloo,tpu:tpu_dist": every rank creates the backends in this order.
        self.device_backend_map = {"cpu": c10d.Backend(c10d.Backend.GLOO), **m, "tpu": c10d.Backend("tpu_dist")}


def install() -> None:
    """Makes c10d build its device -> backend maps with TpuAwareBackendConfig (idempotent)."""
    c10d.BackendConfig = TpuAwareBackendConfig
    # torch.distributed re-exports the name (sharded_tensor reads it there): keep both the same.
    if getattr(torch.distributed, "BackendConfig", None) is _BaseConfig:
        torch.distributed.BackendConfig = TpuAwareBackendConfig
