"""Ray + DDP on device "tpu": two Ray actors join one process group over the c10d backend tpu_dist.

    pip install -r requirements-examples.txt     # ray==2.60.0
    python examples/ray_ddp.py [--steps 5]

The driver starts a local Ray instance (2 CPUs), picks a free port for the TCPStore that rank 0's
`init_process_group("tpu_dist", init_method="tcp://...")` serves, and starts one actor per rank.
Each actor trains a small MLP with DistributedDataParallel on its half of every global batch and
returns, per step, the global mean loss (its loss all-reduced with AVG) and a checksum of its
parameters. The driver checks that both ranks report the same losses and parameters, that the loss
decreases, and that the losses match the same training of the whole batch in one CPU process.
"""
import argparse
import os
import socket
import sys
import time

import ray
import torch

WORLD = 2
BATCH = 16  # global batch; each rank trains on BATCH // WORLD rows
LR = 0.1
# DDP on tpu against one CPU process: the same float32 arithmetic but gradients summed in a
# different order; tests/test_dist_training.py bounds the parameters of a larger model by 1e-5
# after 10 steps (measured 1.2e-7), so the same bound applies to these losses.
TOLERANCE = 1e-5


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, 8, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x, y


def train_cpu(steps):
    """The reference: one process, the whole global batch per step."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(steps):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@ray.remote(num_cpus=1)
class Trainer:
    def __init__(self, rank, init_method):
        import torch.distributed as dist
        self.rank = rank
        torch.tpu.set_device(rank % torch.tpu.device_count())  # the LOCAL_RANK convention of CUDA
        dist.init_process_group("tpu_dist", init_method=init_method, rank=rank, world_size=WORLD)

    def train(self, steps):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dev = torch.device("tpu", torch.tpu.current_device())
        model = DDP(make_model().to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        rows = slice(self.rank * BATCH // WORLD, (self.rank + 1) * BATCH // WORLD)
        losses, checksums = [], []
        for step in range(steps):
            x, y = batch(step)
            loss = torch.nn.functional.mse_loss(model(x[rows].to(dev)), y[rows].to(dev))
            opt.zero_grad()
            loss.backward()  # DDP all-reduces (averages) the gradients over tpu_dist
            opt.step()
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)  # equal shards: the global mean
            losses.append(global_loss.item())
            checksums.append(sum(p.detach().double().sum().item() for p in model.parameters()))
        return {"rank": dist.get_rank(), "backend": dist.get_backend(), "device": str(dev),
                "losses": losses, "checksums": checksums}

    def close(self):
        import torch.distributed as dist
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    # Actors are new processes: hand them this checkout's path and the eager mode.
    env = {k: os.environ[k] for k in ("PYTHONPATH", "TORCH_TPU_EAGER_MODE", "OMP_NUM_THREADS") if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=WORLD, include_dashboard=False, runtime_env={"env_vars": env})
    try:
        init_method = f"tcp://127.0.0.1:{free_port()}"
        actors = [Trainer.remote(rank, init_method) for rank in range(WORLD)]
        results = ray.get([a.train.remote(args.steps) for a in actors], timeout=120)
        ray.get([a.close.remote() for a in actors], timeout=30)
    finally:
        ray.shutdown()
    reference = train_cpu(args.steps)

    for r in results:
        print(f"rank {r['rank']} ({r['backend']}, {r['device']}): losses "
              + " ".join(f"{v:.6f}" for v in r["losses"]))
    print("cpu, one process:    losses " + " ".join(f"{v:.6f}" for v in reference))
    first, second = results
    problems = []
    if first["losses"] != second["losses"]:
        problems.append("the ranks' global losses differ")
    if first["checksums"] != second["checksums"]:
        problems.append(f"the ranks' parameters differ: {first['checksums']} vs {second['checksums']}")
    if not first["losses"][-1] < first["losses"][0]:
        problems.append("the loss did not decrease")
    worst = max(abs(a - b) for a, b in zip(first["losses"], reference))
    if worst > TOLERANCE:
        problems.append(f"losses differ from the CPU run by {worst:.3g} (> {TOLERANCE})")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(f"ray_ddp ok: {WORLD} ranks agree, loss {first['losses'][0]:.6f} -> {first['losses'][-1]:.6f}, "
          f"max |tpu - cpu| {worst:.3g}, {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
