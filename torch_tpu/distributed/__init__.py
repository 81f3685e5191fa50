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
                             on every rank; on by default. Every rank of a group must set the
                             same: a group whose ranks disagree raises at creation on every rank.
"""
import logging
import os

import torch
import torch.distributed as dist

BACKEND = "tpu_dist"
HOST_STORE_PREFIX = "tpu_dist/host/"
AGREEMENT_STORE_PREFIX = "tpu_dist/agree/"

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


def _check_token(check: bool, ext) -> str:
    """What every rank of a group must share: whether it exchanges fingerprints, and their layout."""
    return f"check={int(check)} fingerprint_words={ext.FINGERPRINT_WORDS if check else 0}"


def _agree_on_check(opts, check: bool, ext) -> None:
    """Raises on every rank when the ranks of a group disagree on the collective check. A rank that
    skips the fingerprint exchange (TORCH_TPU_DIST_CHECK=0 on it alone), or sends another layout,
    pairs its first collective with the others' exchange; gloo aborts the process on the size
    mismatch. Agreed once per group, through the group's store."""
    if opts.group_size == 1:
        return
    store = dist.PrefixStore(AGREEMENT_STORE_PREFIX, opts.store)
    mine = _check_token(check, ext)
    store.set(str(opts.group_rank), mine)
    tokens = {}
    for r in range(opts.group_size):
        try:
            tokens[r] = store.get(str(r)).decode()
        except Exception as e:  # a peer without this agreement (another torch_tpu) or one that died
            raise RuntimeError(f"tpu_dist: process group '{opts.group_id}': rank {r} did not publish its "
                               f"collective-check setting within the timeout ({type(e).__name__}: {e}); "
                               "every rank must run the same torch_tpu") from None
    differ = {r: t for r, t in tokens.items() if t != mine}
    if differ:
        ranks = ", ".join(f"rank {r}: {t}" for r, t in sorted(tokens.items()))
        raise RuntimeError(f"tpu_dist: process group '{opts.group_id}': the ranks disagree on the collective "
                           f"check ({ranks}); set TORCH_TPU_DIST_CHECK the same on every rank and run the "
                           "same torch_tpu")


def _create_backend(opts, _backend_options):
    """c10d creator (extended API): a TpuBackend over a gloo host transport on the same store."""
    from .. import _C
    ext = _C._init_distributed()
    check = _env_check_collectives()
    _agree_on_check(opts, check, ext)
    store = dist.PrefixStore(HOST_STORE_PREFIX, opts.store)
    host = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, opts.timeout)
    backend = ext.TpuBackend(opts.group_rank, opts.group_size, host, opts.timeout, opts.group_id, check)
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
