"""One rank of a multiprocess tpu_dist scenario (launched by tests/dist_harness.py).

usage: dist_worker.py SCENARIO RANK WORLD INIT_METHOD [ARGS...]

Every check compares tpu against the same computation on the CPU (the gloo backend on CPU tensors
of the same group, or single-process CPU training) and raises AssertionError on a difference;
the rank then exits non-zero and the harness shows its output.
"""
import atexit
import datetime
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def init(rank, world, init_method, backend="cpu:gloo,tpu:tpu_dist", timeout_s=60):
    torch.tpu.set_device(rank % torch.tpu.device_count())  # the LOCAL_RANK convention of CUDA
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return torch.device("tpu", torch.tpu.current_device())


def same(tpu, cpu, what):
    if isinstance(cpu, (list, tuple)):
        assert len(tpu) == len(cpu), what
        for i, (a, b) in enumerate(zip(tpu, cpu)):
            same(a, b, f"{what}[{i}]")
        return
    assert tpu.device.type == "tpu", f"{what}: result on {tpu.device}"
    got = tpu.cpu()
    assert got.dtype == cpu.dtype and got.shape == cpu.shape, f"{what}: {got.dtype}{list(got.shape)} vs {cpu.dtype}{list(cpu.shape)}"
    # Both sides reduce the same host values through gloo in the same order: exact.
    assert torch.equal(got, cpu), f"{what}: tpu {got} vs gloo {cpu}"


def values(rank, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 1 << 20, shape, generator=g, dtype=dtype)


def both(fn, cpu_tensors, dev):
    """Runs fn on clones of the CPU tensors (gloo) and on tpu copies (tpu_dist)."""
    cpu = [t.clone() for t in cpu_tensors]
    tpu = [t.to(dev) for t in cpu_tensors]
    fn(*cpu)
    fn(*tpu)
    return tpu, cpu


# --- every collective against gloo ------------------------------------------------------------
@scenario
def collectives(rank, world, init_method):
    dev = init(rank, world, init_method)
    R = dist.ReduceOp
    # all_reduce: every ReduceOp; PREMUL_SUM has no gloo reference, so it is checked against SUM of x * f.
    for op in (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX):
        x = values(rank, (3, 5), torch.float32) * 0.1 + (1 if op == R.PRODUCT else 0)
        t, c = both(lambda a: dist.all_reduce(a, op=op), [x], dev)
        same(t, c, f"all_reduce {op}")
    for op in (R.SUM, R.BAND, R.BOR, R.BXOR, R.MIN):
        t, c = both(lambda a: dist.all_reduce(a, op=op), [values(rank, (7,), torch.int64)], dev)
        same(t, c, f"all_reduce int64 {op}")
    t, c = both(lambda a: dist.all_reduce(a), [values(rank, (9,), torch.bfloat16)], dev)
    same(t, c, "all_reduce bfloat16")
    x = values(rank, (6,), torch.float32)
    t = x.to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.25))
    ref = x * 0.25
    dist.all_reduce(ref)
    same([t], [ref], "all_reduce PREMUL_SUM")
    # A strided view is reduced and written back through the view.
    base = values(rank, (4, 6), torch.float32)
    tb, cb = base.to(dev), base.clone()
    dist.all_reduce(tb.t()[1:4])
    piece = cb.t()[1:4].contiguous()  # gloo itself needs dense tensors
    dist.all_reduce(piece)
    cb.t()[1:4] = piece
    same([tb], [cb], "all_reduce of a transposed slice")
    # broadcast / reduce
    for src in range(world):
        t, c = both(lambda a: dist.broadcast(a, src=src), [values(rank, (2, 3), torch.float32)], dev)
        same(t, c, f"broadcast src={src}")
    # Only dst's buffer is defined after a reduce (gloo leaves partial sums elsewhere; tpu_dist keeps the input).
    t, c = both(lambda a: dist.reduce(a, dst=world - 1, op=R.MAX), [values(rank, (5,), torch.float32)], dev)
    if rank == world - 1:
        same(t, c, "reduce MAX")
    t, c = both(lambda a: dist.reduce(a, dst=0), [values(rank, (5,), torch.int64)], dev)
    if rank == 0:
        same(t, c, "reduce SUM int64")
    # all_gather / all_gather_into_tensor
    x = values(rank, (2, 3), torch.float32)
    outs_c = [torch.empty(2, 3) for _ in range(world)]
    outs_t = [torch.empty(2, 3, device=dev) for _ in range(world)]
    dist.all_gather(outs_c, x.clone())
    dist.all_gather(outs_t, x.to(dev))
    same(outs_t, outs_c, "all_gather")
    out_c, out_t = torch.empty(world * 2, 3), torch.empty(world * 2, 3, device=dev)
    dist.all_gather_into_tensor(out_c, x.clone())
    dist.all_gather_into_tensor(out_t, x.to(dev))
    same([out_t], [out_c], "all_gather_into_tensor")
    # reduce_scatter / reduce_scatter_tensor
    for op in (R.SUM, R.MAX, R.AVG):
        ins = [values(rank, (4,), torch.float32, salt=i) for i in range(world)]
        o_c, o_t = torch.empty(4), torch.empty(4, device=dev)
        dist.reduce_scatter(o_c, [i.clone() for i in ins], op=op)
        dist.reduce_scatter(o_t, [i.to(dev) for i in ins], op=op)
        same([o_t], [o_c], f"reduce_scatter {op}")
        big = values(rank, (world * 3, 2), torch.float32)
        o_c, o_t = torch.empty(3, 2), torch.empty(3, 2, device=dev)
        dist.reduce_scatter_tensor(o_c, big.clone(), op=op)
        dist.reduce_scatter_tensor(o_t, big.to(dev), op=op)
        same([o_t], [o_c], f"reduce_scatter_tensor {op}")
    # all_to_all (lists): even pieces against gloo, uneven ones (which gloo's list form refuses, NCCL's
    # allows) against gloo's all_to_all_single of the same data
    ins = [values(rank, (2, 3), torch.float32, salt=i) for i in range(world)]
    outs_c = [torch.empty(2, 3) for _ in range(world)]
    outs_t = [torch.empty(2, 3, device=dev) for _ in range(world)]
    dist.all_to_all(outs_c, [i.clone() for i in ins])
    dist.all_to_all(outs_t, [i.to(dev) for i in ins])
    same(outs_t, outs_c, "all_to_all")
    ins = [values(rank, (rank + 1 + i,), torch.float32, salt=i) for i in range(world)]
    outs_t = [torch.empty(r + 1 + rank, device=dev) for r in range(world)]
    dist.all_to_all(outs_t, [i.to(dev) for i in ins])
    flat_c = torch.empty(sum(r + 1 + rank for r in range(world)))
    dist.all_to_all_single(flat_c, torch.cat(ins), [r + 1 + rank for r in range(world)], [t.numel() for t in ins])
    same([torch.cat(outs_t)], [flat_c], "all_to_all uneven")
    in_splits = [rank + 1 + i for i in range(world)]     # what this rank sends to rank i
    out_splits = [r + 1 + rank for r in range(world)]    # what rank r sends here
    x = values(rank, (sum(in_splits), 2), torch.float32)
    o_c, o_t = torch.empty(sum(out_splits), 2), torch.empty(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(o_c, x.clone(), out_splits, in_splits)
    dist.all_to_all_single(o_t, x.to(dev), out_splits, in_splits)
    same([o_t], [o_c], "all_to_all_single uneven")
    # gather / scatter
    x = values(rank, (3,), torch.float32)
    g_c = [torch.empty(3) for _ in range(world)] if rank == 0 else None
    g_t = [torch.empty(3, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(x.clone(), g_c, dst=0)
    dist.gather(x.to(dev), g_t, dst=0)
    if rank == 0:
        same(g_t, g_c, "gather")
    src = world - 1
    parts = [values(rank, (2, 2), torch.float32, salt=i) for i in range(world)]
    s_c, s_t = torch.empty(2, 2), torch.empty(2, 2, device=dev)
    dist.scatter(s_c, [p.clone() for p in parts] if rank == src else None, src=src)
    dist.scatter(s_t, [p.to(dev) for p in parts] if rank == src else None, src=src)
    same([s_t], [s_c], "scatter")
    # point to point: a ring, blocking and in a batch (receives posted before sends)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    x = values(rank, (4,), torch.float32)
    r_t = torch.empty(4, device=dev)
    if rank % 2 == 0:
        dist.send(x.to(dev), nxt)
        dist.recv(r_t, prv)
    else:
        dist.recv(r_t, prv)
        dist.send(x.to(dev), nxt)
    same([r_t], [values(prv, (4,), torch.float32)], "send/recv")
    r_t = torch.empty(4, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, r_t, prv), dist.P2POp(dist.isend, x.to(dev), nxt)])
    for w in reqs:
        w.wait()
    same([r_t], [values(prv, (4,), torch.float32)], "batch_isend_irecv")
    # coalesced all_reduce (one flat host buffer)
    xs = [values(rank, s, torch.float32, salt=i) for i, s in enumerate([(3,), (2, 2), (5,)])]
    ts = [x.to(dev) for x in xs]
    cs = [x.clone() for x in xs]
    with dist._coalescing_manager(device=dev):
        for t in ts:
            dist.all_reduce(t)
    with dist._coalescing_manager():  # gloo's allreduce_coalesced: the same flat order
        for c in cs:
            dist.all_reduce(c)
    same(ts, cs, "coalesced all_reduce")
    # coalesced all_gather_into_tensor / reduce_scatter_tensor (the *_coalesced backend calls FSDP
    # and DTensor reach) and the list form all_gather_coalesced
    xs = [values(rank, (2, 3), torch.float32, salt=i) for i in range(2)]
    def gather_scatter(device, manager):
        ins = [x.to(device) for x in xs]
        gathered = [torch.empty(world * 2, 3, device=device) for _ in xs]
        with manager():
            for o, i in zip(gathered, ins):
                dist.all_gather_into_tensor(o, i)
        big = [torch.cat([x] * world).to(device) for x in xs]
        reduced = [torch.empty(2, 3, device=device) for _ in xs]
        with manager():
            for o, i in zip(reduced, big):
                dist.reduce_scatter_tensor(o, i)
        return gathered + reduced
    same(gather_scatter(dev, lambda: dist._coalescing_manager(device=dev)),
         gather_scatter(torch.device("cpu"), dist._coalescing_manager), "coalesced all_gather/reduce_scatter")
    outs_t = [[torch.empty(2, 3, device=dev) for _ in xs] for _ in range(world)]
    dist.all_gather_coalesced(outs_t, [x.to(dev) for x in xs])
    same([t for per_rank in outs_t for t in per_rank], [values(r, (2, 3), torch.float32, salt=i)
                                                       for r in range(world) for i in range(2)],
         "all_gather_coalesced")
    # async work and futures
    x = values(rank, (8,), torch.float32)
    t, c = x.to(dev), x.clone()
    work = dist.all_reduce(t, async_op=True)
    fut_value = work.get_future().wait()
    work.wait()
    dist.all_reduce(c)
    same([t, fut_value[0]], [c, c], "async all_reduce and its future")
    dist.barrier()
    # the functional collectives DTensor and compiled graphs use (_c10d_functional ops)
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD
    x = values(rank, (4, 2), torch.float32)
    same([funcol.all_reduce(x.to(dev), "sum", group)], [funcol.all_reduce(x, "sum", group)], "funcol.all_reduce")
    same([funcol.all_gather_tensor(x.to(dev), 0, group)], [funcol.all_gather_tensor(x, 0, group)],
         "funcol.all_gather_tensor")
    y = values(rank, (world * 2, 3), torch.float32)
    same([funcol.reduce_scatter_tensor(y.to(dev), "sum", 0, group)], [funcol.reduce_scatter_tensor(y, "sum", 0, group)],
         "funcol.reduce_scatter_tensor")
    same([funcol.all_to_all_single(y.to(dev), None, None, group)], [funcol.all_to_all_single(y, None, None, group)],
         "funcol.all_to_all_single")
    assert dist.get_backend() == "cpu:gloo,tpu:tpu_dist"
    tpu_backend = dist.group.WORLD._get_backend(dev)
    assert type(tpu_backend).__name__ == "TpuBackend" and tpu_backend.transport == "host (gloo)"
    dist.destroy_process_group()
    print(f"rank {rank}: collectives ok")


@scenario
def compiled(rank, world, init_method):
    """Functional collectives inside torch.compile(backend="tpu") graphs, against eager on CPU/gloo."""
    import torch.distributed._functional_collectives as funcol
    dev = init(rank, world, init_method)
    group = dist.group.WORLD

    def step(x, w):
        y = torch.tanh(x @ w)
        y = funcol.all_reduce(y, "sum", group)
        z = funcol.all_gather_tensor(y * 2, 0, group)
        return z.sum(0) + 1

    x, w = values(rank, (4, 3), torch.float32), values(0, (3, 5), torch.float32, salt=7)
    ref = step(x, w)
    compiled_step = torch.compile(step, backend="tpu")
    for _ in range(2):  # traced, then replayed
        out = compiled_step(x.to(dev), w.to(dev))
        close(out, ref, "compiled step with functional collectives")
    dist.destroy_process_group()
    print(f"rank {rank}: compiled ok")


# --- DDP and FSDP2 training against single-process training -----------------------------------
STEPS, MICRO, D_MODEL, SEQ = 10, 4, 32, 16  # MICRO: samples per rank and micro-batch


def gpt_and_data(world):
    from gpt import GPT, batches, load_text
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, d_model=D_MODEL, n_layers=1, n_heads=2, max_len=SEQ)
    # Two micro-batches per step (gradient accumulation), each MICRO * world samples.
    steps = list(batches(data, STEPS * 2, MICRO * world, SEQ, seed=3))
    return model, [(steps[2 * i], steps[2 * i + 1]) for i in range(STEPS)]


def train_single(world, dtype):
    """Single-process reference: the global batch on CPU, two micro-batches per step."""
    model, data = gpt_and_data(world)
    model = model.to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for micro in data:
        opt.zero_grad()
        for x, y in micro:
            _, loss = model(x, y)
            (loss / len(micro)).backward()
        opt.step()
    return {k: v.detach().double() for k, v in model.named_parameters()}


def max_distance(a, b, names=None):
    names = names or a.keys()
    return max((a[k].double().cpu() - b[k].double().cpu()).abs().max().item() for k in names)


def check_parity(rank, world, params, what):
    """tpu params after distributed training vs single-process CPU training. The bound comes from
    CPU's own float32 distance to the float64 run (a float32 computation in another order may be
    that far off again; it is also held to 1e-5 absolute)."""
    ref32 = train_single(world, torch.float32)
    ref64 = train_single(world, torch.float64)
    names = list(params.keys())
    cpu_err = max_distance(ref32, ref64, names)
    tpu_err = max_distance(params, ref64, names)
    to_cpu32 = max_distance(params, ref32, names)
    bound = 2 * cpu_err + 1e-7
    print(f"rank {rank}: {what}: |tpu-cpu64| {tpu_err:.3g}, |cpu32-cpu64| {cpu_err:.3g}, |tpu-cpu32| {to_cpu32:.3g}")
    assert tpu_err <= bound and to_cpu32 <= 1e-5, f"{what}: {tpu_err} > {bound} or {to_cpu32} > 1e-5"


def local_batch(t, rank):
    return t[rank * MICRO:(rank + 1) * MICRO]


@scenario
def ddp(rank, world, init_method):
    from torch.nn.parallel import DistributedDataParallel as DDP
    dev = init(rank, world, init_method, backend="tpu_dist")
    model, data = gpt_and_data(world)
    model.unused = torch.nn.Linear(3, 3)  # never used in forward: find_unused_parameters
    model = model.to(dev)
    # Small buckets (several allreduces per step), gradients as views of the buckets.
    ddp_model = DDP(model, bucket_cap_mb=0.02, find_unused_parameters=True, gradient_as_bucket_view=True)
    opt = torch.optim.SGD([p for n, p in model.named_parameters() if not n.startswith("unused")],
                          lr=0.1, momentum=0.9)
    for micro in data:
        opt.zero_grad()
        (x0, y0), (x1, y1) = micro
        with ddp_model.no_sync():  # accumulate locally, sync on the second micro-batch
            _, loss = ddp_model(local_batch(x0, rank).to(dev), local_batch(y0, rank).to(dev))
            (loss / 2).backward()
        _, loss = ddp_model(local_batch(x1, rank).to(dev), local_batch(y1, rank).to(dev))
        (loss / 2).backward()
        opt.step()
    params = {k: v.detach() for k, v in model.named_parameters() if not k.startswith("unused")}
    check_parity(rank, world, params, "DDP")
    dist.destroy_process_group()
    print(f"rank {rank}: ddp ok")


def train_fsdp(rank, world, dev, mesh, mp_policy=None, steps=STEPS):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    model, data = gpt_and_data(world)
    model = model.to(dev)
    kw = {"mesh": mesh} if mp_policy is None else {"mesh": mesh, "mp_policy": mp_policy}
    for i, block in enumerate(model.blocks):
        fully_shard(block, reshard_after_forward=(i % 2 == 0), **kw)
    fully_shard(model, reshard_after_forward=False, **kw)
    assert all(isinstance(p, DTensor) for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for micro in data[:steps]:
        opt.zero_grad()
        for x, y in micro:
            _, loss = model(local_batch(x, rank).to(dev), local_batch(y, rank).to(dev))
            (loss / len(micro)).backward()
        opt.step()
    return {k: v.full_tensor().detach() for k, v in model.named_parameters()}


@scenario
def fsdp(rank, world, init_method):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy
    dev = init(rank, world, init_method)
    tpu_mesh = init_device_mesh("tpu", (world,))
    check_parity(rank, world, train_fsdp(rank, world, dev, tpu_mesh), "FSDP2")
    # bfloat16 compute, float32 master weights and gradient reduction: as close to the float32
    # single-process run as the same FSDP2 run on CPU tensors over gloo is.
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    steps = 3
    tpu = train_fsdp(rank, world, dev, tpu_mesh, policy, steps)
    cpu = train_fsdp(rank, world, torch.device("cpu"), init_device_mesh("cpu", (world,)), policy, steps)
    model, data = gpt_and_data(world)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for micro in data[:steps]:
        opt.zero_grad()
        for x, y in micro:
            _, loss = model(x, y)
            (loss / len(micro)).backward()
        opt.step()
    ref = {k: v.detach() for k, v in model.named_parameters()}
    tpu_err, cpu_err = max_distance(tpu, ref), max_distance(cpu, ref)
    print(f"rank {rank}: FSDP2 bf16: |tpu-fp32| {tpu_err:.3g}, |cpu(gloo)-fp32| {cpu_err:.3g}")
    assert tpu_err <= 2 * cpu_err, f"FSDP2 bf16: {tpu_err} > 2 * {cpu_err}"
    dist.destroy_process_group()
    print(f"rank {rank}: fsdp ok")


# --- DTensor, tensor parallelism, distributed checkpoint ----------------------------------------
def close(tpu, cpu, what):
    assert tpu.device.type == "tpu", f"{what}: on {tpu.device}"
    torch.testing.assert_close(tpu.cpu(), cpu, msg=lambda m: f"{what}: {m}")


@scenario
def dtensor(rank, world, init_method):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    import torch.distributed.checkpoint as dcp
    dev = init(rank, world, init_method, backend="tpu_dist")
    # 1-D mesh over every rank: sharding, ops, redistribution (all_gather, all_to_all, all_reduce).
    mesh = init_device_mesh("tpu", (world,))
    assert mesh.device_type == "tpu"
    a, b = torch.randn(8, 12, generator=torch.Generator().manual_seed(1)), torch.randn(12, 4)
    b = torch.randn(12, 4, generator=torch.Generator().manual_seed(2))
    da, db = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Replicate()])
    assert da.to_local().device.type == "tpu" and da.to_local().shape == (8 // world, 12)
    close(da.full_tensor(), a, "Shard(0).full_tensor")
    close((da @ db).full_tensor(), a @ b, "sharded matmul")
    close((da * 2 + 1).sum().full_tensor(), (a * 2 + 1).sum(), "pointwise + sum")
    close(da.redistribute(mesh, [Shard(1)]).full_tensor(), a, "Shard(0) -> Shard(1)")
    close(da.redistribute(mesh, [Replicate()]).to_local(), a, "Shard(0) -> Replicate")
    partial = DTensor.from_local(torch.full((3,), float(rank + 1), device=dev), mesh, [Partial()])
    close(partial.redistribute(mesh, [Replicate()]).to_local(), torch.full((3,), world * (world + 1) / 2),
          "Partial -> Replicate")
    # 2-D mesh (dp x tp): Colwise then Rowwise parallel MLP on the tp dimension, forward and backward.
    mesh2 = init_device_mesh("tpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 6))
    tp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 6))
    tp.load_state_dict(ref.state_dict())
    tp = parallelize_module(tp.to(dev), mesh2["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(10 + mesh2.get_coordinate()[0]))
    out_ref = ref(x)
    out_ref.sum().backward()
    out = tp(x.to(dev))
    out.sum().backward()
    close(out, out_ref.detach(), "tp forward")
    for (name, p), (_, q) in zip(tp.named_parameters(), ref.named_parameters()):
        close(p.grad.full_tensor(), q.grad, f"tp grad {name}")
    # Distributed checkpoint: save the sharded state, load it into a model with other values.
    folder = os.path.join(os.path.dirname(init_method[len("file://"):]), "dcp")
    state = {"model": tp.state_dict()}
    dcp.save(state, checkpoint_id=folder)
    other = parallelize_module(torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                                   torch.nn.Linear(8, 6)).to(dev),
                               mesh2["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    loaded = {"model": other.state_dict()}
    dcp.load(loaded, checkpoint_id=folder)
    other.load_state_dict(loaded["model"])
    for (name, p), (_, q) in zip(other.named_parameters(), ref.named_parameters()):
        assert isinstance(p, DTensor) and p.to_local().device.type == "tpu"
        close(p.full_tensor(), q.detach(), f"checkpoint round trip {name}")
    dist.destroy_process_group()
    print(f"rank {rank}: dtensor ok")


# --- MPMD and mismatched collectives ---------------------------------------------------------
def expect_error(fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        for n in needles:
            assert n in msg, f"error does not name {n!r}: {msg}"
        return msg
    raise AssertionError(f"no RuntimeError (expected one naming {needles})")


@scenario
def mpmd(rank, world, init_method):
    import logging
    import time
    # The transport choice is logged once per process (INFO on torch_tpu.distributed).
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("torch_tpu.distributed").setLevel(logging.INFO)
    # init_process_group() with no backend on a tpu host: tpu_dist for tpu tensors, gloo for CPU ones
    # (torch_tpu/distributed/_defaults.py; every init variant: tests/test_dist_inits.py).
    torch.tpu.set_device(rank % torch.tpu.device_count())
    dist.init_process_group(init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend_config() == "cpu:gloo,tpu:tpu_dist", dist.get_backend_config()
    assert type(dist.group.WORLD._get_backend(torch.device("tpu"))).__name__ == "TpuBackend"
    dev = torch.device("tpu", torch.tpu.current_device())
    # Rank 0 does extra work between collectives (host reads, an eval pass): results stay right.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(dev)
    expected = sum(float(r + 1) for r in range(world))
    for step in range(3):
        x = torch.full((4,), float(rank + 1), device=dev) * (step + 1)
        if rank == 0:
            with torch.no_grad():
                model.eval()
                logged = model(torch.ones(3, 4, device=dev)).sum().item()
                assert logged == logged  # a real host read, not NaN
            _ = (x * 2).max().item()
        dist.all_reduce(x)
        assert x.cpu().tolist() == [expected * (step + 1)] * 4, (step, x.cpu())
    # Mismatched collectives: the same RuntimeError on every rank, naming both sides.
    t = torch.ones(4, device=dev)
    msg = expect_error(lambda: dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0),
                       "rank 0: all_reduce #", "rank 1: broadcast #", "Float[4]")
    print(f"rank {rank}: {msg}")
    shape = (4,) if rank == 0 else (5,)
    expect_error(lambda: dist.all_reduce(torch.ones(shape, device=dev)), "Float[4]", "Float[5]")
    dtype = torch.float32 if rank == 0 else torch.int64
    expect_error(lambda: dist.all_gather_into_tensor(torch.empty(2 * world, dtype=dtype, device=dev),
                                                     torch.ones(2, dtype=dtype, device=dev)),
                 "all_gather_into_tensor", "Float", "Long")
    # Bad input fails on the calling rank alone, before any exchange with the peers.
    # (torch's Python layer checks most arguments itself; the ProcessGroup call reaches tpu_dist directly.)
    try:
        if rank == 0:
            dist.group.WORLD.allreduce_coalesced([torch.ones(2, device=dev), torch.ones(2, dtype=torch.int64, device=dev)],
                                                 dist.AllreduceCoalescedOptions())
    except TypeError as e:
        assert "all_reduce_coalesced" in str(e) and "dtype" in str(e), e
    else:
        if rank == 0:
            raise AssertionError("all_reduce_coalesced with mixed dtypes did not raise TypeError")
    # After a reported mismatch the group still works.
    t = torch.full((2,), float(rank), device=dev)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(sum(range(world)))] * 2
    # abort(): later collectives on that group raise instead of running.
    import torch_tpu.distributed as tpu_dist
    aborted = dist.new_group()
    dist.all_reduce(torch.ones(1, device=dev), group=aborted)
    tpu_dist.backend_of(aborted).abort()
    expect_error(lambda: dist.all_reduce(torch.ones(1, device=dev), group=aborted), "after abort()")
    # A rank that never issues the collective: the others get an error within the group's timeout.
    short = dist.new_group(timeout=datetime.timedelta(seconds=3))
    if rank == 0:
        start = time.monotonic()
        expect_error(lambda: dist.all_reduce(torch.ones(3, device=dev), group=short), "tpu_dist", "all_reduce")
        waited = time.monotonic() - start
        assert waited < 30, f"took {waited:.1f} s for a 3 s timeout"
        print(f"rank 0: missing collective raised after {waited:.1f} s")
    # Rank 1 stays alive past rank 0's timeout, then both leave through a store barrier (the short
    # group is broken now; the world group is not).
    store = dist.distributed_c10d._get_default_store()
    store.add("mpmd-done", 1)
    while int(store.add("mpmd-done", 0)) < world:
        time.sleep(0.05)
    dist.destroy_process_group()
    print(f"rank {rank}: mpmd ok")


# --- multi-host: torchrun node groups over a TCPStore ---------------------------------------------
@scenario
def multinode(rank, world, init_method):
    """Run by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK from its agent; env:// = TCPStore)."""
    local = int(os.environ["LOCAL_RANK"])
    node = int(os.environ["GROUP_RANK"])
    torch.tpu.set_device(local % torch.tpu.device_count())
    dist.init_process_group("tpu_dist", init_method=init_method, timeout=datetime.timedelta(seconds=60))
    assert dist.get_rank() == rank and dist.get_world_size() == world
    dev = torch.device("tpu", torch.tpu.current_device())
    x = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    assert x.cpu().tolist() == [world * (world + 1) / 2] * 4, x.cpu()
    nodes = torch.empty(world, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(nodes, torch.tensor([node], device=dev))
    assert len(set(nodes.cpu().tolist())) == int(os.environ["GROUP_WORLD_SIZE"]) > 1, nodes.cpu()
    dist.destroy_process_group()
    print(f"rank {rank} (node {node}): multinode ok")


if __name__ == "__main__":
    name, rank, world, init_method, *args = sys.argv[1:]
    if rank == "env":  # launched by torchrun
        rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
    SCENARIOS[name](int(rank), int(world), init_method, *args)
    # The scenario passed; leave without finalizing the interpreter. Functional collectives (funcol,
    # DTensor) keep their process group referenced after destroy_process_group (a PyTorch leak,
    # plain gloo included), so the group's gloo worker threads outlive it, and one that drops its
    # last reference to a Python-visible tensor while the interpreter finalizes is killed inside a
    # noexcept frame: "terminate called without an active exception" (pytorch/pytorch#179291).
    # atexit handlers (torch_tpu's exit checks among them) still run first.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
