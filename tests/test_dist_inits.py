"""The same DDP script (tests/dist_inits_worker.py) under every way a CPU or CUDA script initialises
torch.distributed, on 2 processes, against single-process CPU training (the bound of
tests/test_dist_training.py: twice CPU float32's distance to float64, and within 1e-5 of CPU float32).

No backend, "tpu_dist", "gloo" and "cpu:gloo,tpu:tpu_dist" (file://), env:// and torchrun (no backend),
FSDP2 under "gloo"; "nccl" must raise a RuntimeError naming tpu_dist. Under "gloo" and without a backend,
tpu tensors reach tpu_dist and CPU tensors gloo (torch_tpu/distributed/_defaults.py).
"""
import os
import socket
import sys

import pytest
import torch.distributed as dist

import dist_harness

WORKER = os.path.join(dist_harness.HERE, "dist_inits_worker.py")
FILE_VARIANTS = ["none", "tpu_dist", "gloo", "cpu:gloo,tpu:tpu_dist", "env", "fsdp-gloo", "nccl"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(commands, mode, timeout):
    out = dist_harness.launch_commands(commands, mode, timeout=timeout)
    return "\n".join(out)


def test_ddp_under_every_init(mode, tmp_path):
    # Strict runs every variant; debug and fused the two the issue found broken (every one under make test-dist).
    full = mode == "strict" or os.environ.get("TORCH_TPU_DIST_ALL_MODES", "0") not in ("", "0")
    variants = FILE_VARIANTS if full else ["none", "gloo"]
    port = _free_port()
    cmds = [[sys.executable, WORKER, str(r), "2", str(tmp_path), str(port), *variants] for r in range(2)]
    out = _run(cmds, mode, timeout=150)
    for v in variants:
        assert out.count(f": {v} ok") == 2, out


def test_ddp_under_torchrun(mode, tmp_path):
    dist_harness.skip_unless_full(mode)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", "0", WORKER, "env", "2", str(tmp_path), "0", "torchrun"]
    out = _run([cmd], mode, timeout=120)
    assert out.count(": torchrun ok") == 2, out


def test_backend_strings_map_tpu_to_tpu_dist():
    # In-process: the maps c10d builds (no group is created).
    config = dist.distributed_c10d.BackendConfig
    assert config("gloo").get_device_backend_map() == {"cpu": "gloo", "tpu": "tpu_dist"}
    assert config("undefined").get_device_backend_map() == {"cpu": "gloo", "tpu": "tpu_dist"}
    assert config("tpu_dist").get_device_backend_map() == {"tpu": "tpu_dist"}
    assert config("cpu:gloo").get_device_backend_map() == {"cpu": "gloo"}  # an explicit map is left alone
    assert dist.BackendConfig is config
    with pytest.raises(RuntimeError, match="tpu_dist"):
        config("nccl")
