"""torch.distributed on tpu (backend tpu_dist) next to gloo on CPU tensors, in the same run.

1. all_reduce (SUM, float32) of 1 KB .. 64 MB, 2 processes: gloo on CPU tensors, tpu_dist on tpu
   tensors (host transport: download, gloo, upload), and tpu_dist without its fingerprint check
   (TORCH_TPU_DIST_CHECK=0's per-group switch). Median microseconds per call; ratio = tpu_dist / gloo.
2. Training steps/s of the GPT example (d128, 2 layers, seq 64, batch 8 per rank, SGD) with DDP and
   with FSDP2 (fully_shard per block and root), 1 process vs 2 processes (each rank its own batch:
   weak scaling: "samples/s 2/1" is twice the step ratio), strict eager mode. On a machine with fewer
   cores than ranks need, the ranks' device work (the XLA CPU plugin computes on the host) competes.

    python benchmarks/distributed.py [--sizes 1K,16K,256K,4M,64M] [--steps 10] [--skip-training]
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = {"K": 1 << 10, "M": 1 << 20}


def parse_size(s):
    return int(s[:-1]) * UNITS[s[-1]] if s[-1] in UNITS else int(s)


# --- workers (one process per rank) ------------------------------------------------------------
def init(rank, world, init_method):
    import torch
    import torch.distributed as dist
    torch.tpu.set_device(rank % torch.tpu.device_count())
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    return torch.device("tpu", torch.tpu.current_device())


def timed(variants, iters, repeats=7):
    """{name: (fn, sync)} -> {name: median microseconds per call}. The variants take turns in every
    repeat, so a load change on a shared machine hits all of them alike."""
    import torch.distributed as dist
    samples = {name: [] for name in variants}
    for fn, sync in variants.values():
        fn()
        sync()
    for _ in range(repeats):
        for name, (fn, sync) in variants.items():
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            samples[name].append((time.perf_counter() - start) / iters * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


def worker_allreduce(rank, world, init_method, sizes):
    import torch
    import torch.distributed as dist
    dev = init(rank, world, init_method)
    backend = dist.group.WORLD._get_backend(dev)

    def tpu_reduce(check, t):
        def run():
            backend.check_collectives = check
            dist.all_reduce(t)
        return run

    rows = []
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        iters = max(3, min(100, (16 << 20) // max(nbytes, 1)))
        cpu, tpu = torch.zeros(n), torch.zeros(n, device=dev)  # zeros: the sum never overflows
        row = {"bytes": nbytes}
        row.update(timed({"gloo": (lambda: dist.all_reduce(cpu), lambda: None),
                          "tpu_dist": (tpu_reduce(True, tpu), torch.tpu.synchronize),
                          "tpu_dist_nocheck": (tpu_reduce(False, tpu), torch.tpu.synchronize)}, iters))
        backend.check_collectives = True
        rows.append(row)
    if rank == 0:
        print("RESULT " + json.dumps(rows), flush=True)
    dist.destroy_process_group()


def worker_train(rank, world, init_method, kind, steps):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gpt import GPT, batches, load_text
    dev = init(rank, world, init_method)
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, d_model=128, n_layers=2, max_len=64).to(dev)
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        run = DDP(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("tpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        run = fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    warmup = 3
    times = []
    for i, (x, y) in enumerate(batches(data, warmup + steps, 8, 64, seed=rank)):
        start = time.perf_counter()
        _, loss = run(x.to(dev), y.to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    if rank == 0:
        print("RESULT " + json.dumps({"steps_per_s": 1.0 / statistics.median(times)}), flush=True)
    dist.destroy_process_group()


# --- launcher ---------------------------------------------------------------------------------
def launch(world, *args, timeout=900):
    with tempfile.TemporaryDirectory() as tmp:
        init_method = f"file://{tmp}/store"
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.setdefault("TORCH_TPU_EAGER_MODE", "strict")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), str(world),
                                   init_method, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env) for r in range(world)]
        outs = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise
            outs.append(out)
        for p, out in zip(procs, outs):
            if p.returncode != 0:
                raise RuntimeError(f"worker failed:\n{out[-3000:]}")
        for line in outs[0].splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise RuntimeError(f"no result:\n{outs[0][-3000:]}")


def human(nbytes):
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, world, init_method, what, *rest = sys.argv[2:]
        if what == "allreduce":
            worker_allreduce(int(rank), int(world), init_method, [int(s) for s in rest])
        else:
            worker_train(int(rank), int(world), init_method, what, int(rest[0]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1K,16K,256K,4M,64M")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--skip-training", action="store_true")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]

    rows = launch(2, "allreduce", *sizes)
    print("all_reduce, 2 processes (median us per call; ratio to gloo on CPU tensors)")
    print(f"{'size':>8} {'gloo cpu':>10} {'tpu_dist':>10} {'ratio':>6} {'no check':>10} {'ratio':>6}")
    for r in rows:
        print(f"{human(r['bytes']):>8} {r['gloo']:>10.1f} {r['tpu_dist']:>10.1f} {r['tpu_dist'] / r['gloo']:>6.2f}"
              f" {r['tpu_dist_nocheck']:>10.1f} {r['tpu_dist_nocheck'] / r['gloo']:>6.2f}")
    if args.skip_training:
        return
    print("\ntraining steps/s, GPT d128 L2 s64 b8 per rank, SGD, strict mode")
    print(f"{'':>6} {'1 proc':>8} {'2 procs':>8} {'2/1':>6} {'samples/s 2/1':>14}")
    for kind in ("ddp", "fsdp"):
        one = launch(1, kind, args.steps)["steps_per_s"]
        two = launch(2, kind, args.steps)["steps_per_s"]
        print(f"{kind:>6} {one:>8.2f} {two:>8.2f} {two / one:>6.2f} {2 * two / one:>14.2f}")


if __name__ == "__main__":
    main()
