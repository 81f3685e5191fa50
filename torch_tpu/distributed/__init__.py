"""torch.distributed backend "tpu_dist" for device "tpu" (C++: csrc/distributed/TpuBackend).

Registered when torch_tpu loads (inside `import torch`), so all of these work unchanged:

    dist.init_process_group("tpu_dist")               # tpu tensors
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")  # cpu tensors on gloo, tpu tensors here
    dist.init_process_group()                         # cpu tensors on gloo, tpu tensors here
    dist.init_process_group("gloo")                   # the same (as gloo takes CUDA tensors)

"nccl" on a host without CUDA raises a RuntimeError naming tpu_dist (_defaults.py).

Transport: the XLA CPU plugin's client has no cross-process collectives, so tpu tensors are staged
through host memory and reduced by a ProcessGroupGloo that this backend owns (on the group's own
store, under the prefix "tpu_dist/host/"). The device transport (StableHLO collectives compiled
for the group, for TPU and GPU plugins) is not built yet; on those plugins the host transport runs
too, and the log says so once.

Environment:
    TORCH_TPU_DIST_CHECK=0   skip the per-collective fingerprint exchange (op, sequence number,
                             dtype, shapes) that turns mismatched collectives into a RuntimeError
                             on every rank; on by default.
"""
import logging
import os

import torch
import torch.distributed as dist

BACKEND = "tpu_dist"
HOST_STORE_PREFIX = "tpu_dist/host/"

_log = logging.getLogger("torch_tpu.distributed")
_transport_logged = False


def _env_check_collectives() -> bool:
    return os.environ.get("TORCH_TPU_DIST_CHECK", "1").strip().lower() not in ("0", "off", "false", "no")


def _log_transport_once(backend) -> None:
    global _transport_logged
    if _transport_logged:
        return
    _transport_logged = True
    from .. import _C
    platform = _C._platform_name() if _C._is_available() else "unavailable"
    if platform == "cpu":
        why = "the XLA CPU plugin has no cross-process collectives"
    else:
        why = f"device collectives for plugin '{platform}' are not built yet"
    _log.info("tpu_dist: %s transport (%s)", backend.transport, why)


def _create_backend(opts, _backend_options):
    """c10d creator (extended API): a TpuBackend over a gloo host transport on the same store."""
    from .. import _C
    ext = _C._init_distributed()
    store = dist.PrefixStore(HOST_STORE_PREFIX, opts.store)
    host = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, opts.timeout)
    backend = ext.TpuBackend(opts.group_rank, opts.group_size, host, opts.timeout, opts.group_id,
                             _env_check_collectives())
    _log_transport_once(backend)
    return backend


def register() -> None:
    """Registers "tpu_dist" with c10d for device "tpu" and makes it the tpu backend of undefined
    and "gloo" groups (idempotent)."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu"])
    from . import _defaults
    _defaults.install()


def backend_of(group=None):
    """The TpuBackend object of `group` (default group when None), for its statistics and options."""
    group = group or dist.distributed_c10d._get_default_group()
    return group._get_backend(torch.device("tpu"))
