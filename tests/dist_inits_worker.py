"""One rank training the same DDP script under several ways of initialising torch.distributed
(launched by tests/test_dist_inits.py, or by torchrun with RANK=env).

usage: dist_inits_worker.py RANK WORLD STORE_DIR PORT VARIANT [VARIANT ...]

Variants: "none" (init_process_group() without a backend), "tpu_dist", "gloo", "cpu:gloo,tpu:tpu_dist"
(file:// stores), "env" (env:// with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, no backend), "torchrun"
(everything from torchrun's environment), "fsdp-gloo" (FSDP2 under "gloo"), "nccl" (must raise naming
tpu_dist). Each training variant is held to the same bound as tests/dist_worker.py's ddp scenario.
"""
import atexit
import datetime
import functools
import os
import sys

import torch
import torch.distributed as dist

import dist_worker as dw

TIMEOUT = datetime.timedelta(seconds=60)


@functools.lru_cache(maxsize=None)
def references(world):
    """Single-process CPU training in float32 and float64 (computed once per process)."""
    return dw.train_single(world, torch.float32), dw.train_single(world, torch.float64)


def check_parity(rank, world, params, what):
    # The bound of dist_worker.check_parity: twice CPU float32's own distance to float64, and 1e-5 of CPU.
    ref32, ref64 = references(world)
    cpu_err = dw.max_distance(ref32, ref64, params.keys())
    tpu_err = dw.max_distance(params, ref64)
    to_cpu32 = dw.max_distance(params, ref32)
    print(f"rank {rank}: {what}: |tpu-cpu64| {tpu_err:.3g}, |cpu32-cpu64| {cpu_err:.3g}, |tpu-cpu32| {to_cpu32:.3g}")
    assert tpu_err <= 2 * cpu_err + 1e-7 and to_cpu32 <= 1e-5, f"{what}: {tpu_err}, {to_cpu32}"


def init(variant, rank, world, store_dir, port):
    torch.tpu.set_device(rank % torch.tpu.device_count())
    if variant == "torchrun":
        dist.init_process_group(timeout=TIMEOUT)
    elif variant == "env":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
        dist.init_process_group(init_method="env://", timeout=TIMEOUT)
    else:
        backend = {"none": None, "fsdp-gloo": "gloo"}.get(variant, variant)
        kw = {} if backend is None else {"backend": backend}
        name = variant.replace(":", "-").replace(",", "_")
        dist.init_process_group(init_method=f"file://{store_dir}/{name}", rank=rank, world_size=world,
                                timeout=TIMEOUT, **kw)
    return torch.device("tpu", torch.tpu.current_device())


def check_backends(variant, rank, world):
    """tpu tensors reach tpu_dist; where the script's backend serves CPU tensors, they stay on gloo."""
    pg = dist.distributed_c10d._get_default_group()
    expected = {"none": "undefined", "env": "undefined", "torchrun": "undefined", "fsdp-gloo": "gloo"}
    assert dist.get_backend() == expected.get(variant, variant), dist.get_backend()
    assert type(pg._get_backend(torch.device("tpu"))).__name__ == "TpuBackend"
    sub = dist.new_group(list(range(world)))  # takes the default group's backend string: the same routing
    t = torch.full((2,), float(rank + 1), device=torch.device("tpu", torch.tpu.current_device()))
    dist.all_reduce(t, group=sub)
    assert t.cpu().tolist() == [world * (world + 1) / 2] * 2, t.cpu()
    if variant != "tpu_dist":
        assert isinstance(pg._get_backend(torch.device("cpu")), dist.ProcessGroupGloo)
        x = torch.full((3,), float(rank + 1))
        dist.all_reduce(x)
        assert x.tolist() == [world * (world + 1) / 2] * 3, x


def train_ddp(rank, world, dev):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model, data = dw.gpt_and_data(world)
    model = model.to(dev)
    ddp_model = DDP(model, bucket_cap_mb=0.02)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for (x0, y0), (x1, y1) in data:
        opt.zero_grad()
        with ddp_model.no_sync():  # accumulate locally, sync on the second micro-batch
            _, loss = ddp_model(dw.local_batch(x0, rank).to(dev), dw.local_batch(y0, rank).to(dev))
            (loss / 2).backward()
        _, loss = ddp_model(dw.local_batch(x1, rank).to(dev), dw.local_batch(y1, rank).to(dev))
        (loss / 2).backward()
        opt.step()
    return {k: v.detach() for k, v in model.named_parameters()}


def expect_nccl_error(rank, world, store_dir):
    try:
        init("nccl", rank, world, store_dir, None)
    except RuntimeError as exc:
        assert "tpu_dist" in str(exc), exc
        print(f"rank {rank}: nccl refused: {exc}")
        return
    raise AssertionError("init_process_group('nccl') did not raise")


def run(variant, rank, world, store_dir, port):
    if variant == "nccl":
        return expect_nccl_error(rank, world, store_dir)
    dev = init(variant, rank, world, store_dir, port)
    check_backends(variant, rank, world)
    if variant == "fsdp-gloo":
        from torch.distributed.device_mesh import init_device_mesh
        params = dw.train_fsdp(rank, world, dev, init_device_mesh("tpu", (world,)))
    else:
        params = train_ddp(rank, world, dev)
    check_parity(rank, world, params, f"{variant}: {'FSDP2' if variant.startswith('fsdp') else 'DDP'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    rank, world, store_dir, port, *variants = sys.argv[1:]
    if rank == "env":  # torchrun
        rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
    for v in variants:
        run(v, int(rank), int(world), store_dir, port)
        print(f"rank {rank}: {v} ok", flush=True)
    # As in dist_worker.py: leave without finalizing the interpreter (FSDP2's DTensor keeps the group's gloo
    # threads alive past destroy_process_group, pytorch/pytorch#179291); atexit handlers still run first.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
