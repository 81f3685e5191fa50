"""The Dynamo backend "tpu": one fused program per FX graph, from the eager lowerings.

Dynamo captures a graph; AOTAutograd (min-cut partitioner, core ATen decompositions
only for ops with no tpu kernel) turns it into functional forward / backward (or
inference) graphs of ATen ops. Each graph is run as it is, op by op, through the same
tpu kernels as eager, inside a compiled-graph scope of the executor
(`_C._compiled_graph_begin/_end`, Executor.h): whatever the eager mode, every op is
traced into one pending fused graph (no size bound, no step cut), and the end of the
graph flushes it as ONE StableHLO module, compiled once per module text through both
cache tiers (FusedGraph.cpp). There is no second lowering table.

From the second call on, a graph whose first run was captured whole is replayed: its
executable is launched on the new input buffers without running the FX graph (replay.py).
A graph with symbolic sizes (dynamic=True, mark_dynamic) runs padded to size buckets, one
program per bucket, with the real sizes as a runtime operand (buckets.py).

What the runtime wrappers of AOTAutograd do outside the graph (input mutations of
training graphs written back with copy_, aliased outputs regenerated as views, the
RNG state, non-tensor outputs) runs in eager mode, so it behaves as eager does.
"""
import functools

import torch

from .. import _C


def _has_tpu_rule(op) -> bool:
    """True when the op runs on tpu without decomposing it: our own kernel, or a
    composite-explicit kernel that dispatches again to ops (which then reach ours).
    The dispatcher's computed table would say yes for every op (the boxed fallback)."""
    name = op.name()
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
               for key in ("PrivateUse1", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"))


@functools.cache
def decompositions() -> dict:
    """Core ATen decompositions for the ops we have no rule for; everything else stays
    the op eager runs (same kernels, same numerics, same RNG stream)."""
    from torch._decomp import core_aten_decompositions

    table = {}
    for op, fn in core_aten_decompositions().items():
        if isinstance(op, torch._ops.OpOverload) and not _has_tpu_rule(op):
            table[op] = fn
    return table


def _vals(node):
    value = node.meta.get("val")
    return value if isinstance(value, (tuple, list)) else (value,)


def _is_cpu_scalar(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0


def _all_tpu(node) -> bool:
    return all(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in _vals(node))


def cpu_scalars_used_on_tpu(gm: torch.fx.GraphModule) -> list:
    """Indices of the graph's 0-dim CPU tensor inputs whose values only reach tpu results:
    a learning rate given as `torch.tensor(0.01)` (with the scalar math done on it, such as
    AdamW's `1 - lr * weight_decay`), a scale. Passing them to the graph as tpu tensors gives
    the same values (0-dim tensors promote alike on either device) and lets the call replay:
    as CPU scalars their values would be baked into the program as operands. An input whose
    CPU scalar math reaches a graph output or a CPU result (a CPU step counter updated in
    place) stays as it is."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # CPU scalar nodes: 0-dim CPU inputs, and ops computing 0-dim CPU tensors from them and from
    # constants (`torch.scalar_tensor(2.0)`, no inputs: GPT-2's attention scale divides one by one).
    scalar = {n for n in placeholders if _is_cpu_scalar(_vals(n)[0])}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n not in scalar and len(_vals(n)) == 1 and _is_cpu_scalar(_vals(n)[0]):
            if all(a in scalar for a in n.all_input_nodes):
                scalar.add(n)
    # Components of that scalar math; one is moved to tpu only if all of it ends in tpu results.
    parent = {n: n for n in scalar}

    def root(n):
        while parent[n] is not n:
            n = parent[n]
        return n

    for n in scalar:
        for a in n.all_input_nodes:
            if a in scalar:
                parent[root(a)] = root(n)
    bad = {root(n) for n in scalar
           if any(u not in scalar and (u.op != "call_function" or not _all_tpu(u)) for u in n.users)}
    return [i for i, n in enumerate(placeholders) if n in scalar and root(n) not in bad and n.users]


def _tpu_device(gm: torch.fx.GraphModule):
    """The tpu device of the graph's values (None for a graph with none)."""
    return next((v.device for n in gm.graph.nodes for v in _vals(n) if _on_tpu(v)), None)


def _moves_to_tpu(node) -> bool:
    """Every use of this CPU value copies it to tpu (directly, or through lift_fresh_copy)."""
    def is_copy(u):
        return u.op == "call_function" and u.target is torch.ops.aten._to_copy.default and _all_tpu(u)
    return bool(node.users) and all(
        is_copy(u) or (u.op == "call_function" and u.target is torch.ops.aten.lift_fresh_copy.default
                       and u.users and all(is_copy(w) for w in u.users))
        for u in node.users)


def constants_as_arguments(gm: torch.fx.GraphModule) -> list:
    """The graph's tensor constants (`torch.tensor(...)` inside the compiled function: attributes read
    through lift_fresh_copy) turned into trailing placeholders; returns the tensors to append to every
    call's arguments. A replay binds arguments only, so a graph reading a constant can replay (Falcon's
    empty cache tensor). A CPU constant whose every use copies it to tpu is moved to tpu once here: the
    copy becomes an op of the program, whose result a replay can produce, instead of an upload (Mistral
    returns such a copy). Other CPU constants stay attributes."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fake_mode = torch._guards.detect_fake_mode([n.meta.get("val") for n in placeholders])
    if fake_mode is None or not placeholders:
        return []
    device = _tpu_device(gm)
    constants, last = [], placeholders[-1]
    for node in [n for n in gm.graph.nodes if n.op == "get_attr"]:
        value = torch.fx.graph_module._get_attr(gm, node.target)
        if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
            continue
        if value.device.type != "tpu":
            if device is None or not _moves_to_tpu(node):
                continue
            with unset_fake_temporarily():  # AOTAutograd compiles under its fake mode
                value = value.to(device)
        with gm.graph.inserting_after(last):
            last = gm.graph.placeholder(f"constant_{len(constants)}")
        last.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)
        node.replace_all_uses_with(last)
        gm.graph.erase_node(node)
        constants.append(value)
    if constants:
        gm.graph.lint()
        gm.recompile()
    return constants


def _graph_runner(gm: torch.fx.GraphModule, example_inputs):
    """AOTAutograd's compiler for one forward, backward or inference graph."""
    from torch.fx.graph import _BoxedCodeGen

    constants = constants_as_arguments(gm)
    # Boxed calling convention: the generated forward takes the argument list and clears
    # it, so inputs the graph no longer needs can be freed while it runs (as inductor does).
    gm.graph.set_codegen(_BoxedCodeGen())
    gm.recompile()
    forward = gm.forward
    from . import bucketed_graph, replay

    # Replay (replay.py): a call with new argument signature also captures what its flush ran;
    # later calls with that signature launch the program directly.
    plans = replay.Plans() if replay.enabled() else None
    promoted = cpu_scalars_used_on_tpu(gm)
    device = _tpu_device(gm)

    bucketed = bucketed_graph.plan(gm)
    bucket_plans = replay.Plans() if bucketed is not None and replay.enabled() else None

    def execute(args, body, plans):
        """body(args) traced into one program, or a replay of the program captured before."""
        if plans is not None:
            out = plans.run(args)
            if out is not None:
                return out
        capture = plans is not None and plans.should_capture(args)
        kept = list(args) if capture else None  # the boxed forward clears args
        graph = _C._CapturedGraph() if capture else None
        if graph is not None:
            # No plain numbers among the arguments: every operand is a constant of the FX graph.
            graph.constant_operands = not any(isinstance(a, (int, float, complex)) for a in args)
        out = replay.traced(lambda: body(args), graph)
        if graph is not None:
            plans.add(graph, kept, out)
        return out

    def run_bucketed(args):
        # Sizes rounded up to their buckets, inputs padded; the real sizes are the last operand.
        values = bucketed.real_values(args)
        key = tuple(bucketed.buckets(values))
        padded = bucketed.pad_inputs(args, key)
        operand = torch.tensor(values, dtype=torch.int64, device=device)
        out = execute(padded + [operand], lambda a: bucketed.trace(a[:-1], key, a[-1]), bucket_plans)
        result = bucketed.cut_outputs(out, values, padded, args)
        args.clear()
        return result

    def run(args):
        nonlocal bucketed
        args.extend(constants)
        for i in promoted:
            args[i] = args[i].to(device)
        if bucketed is not None:
            try:
                return run_bucketed(args)
            except Exception as e:  # an op that cannot run padded: exact sizes are always right
                bucketed_graph.log_exact(e)
                bucketed = None
        return execute(args, forward, plans)

    run._boxed_call = True
    return run


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """torch.compile(fn, backend="tpu"). `mode` and `options` are inductor's tuning
    knobs; this backend has none, so they are accepted and ignored."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    kwargs.pop("mode", None)
    kwargs.pop("options", None)
    if kwargs:
        raise TypeError(f"torch.compile backend 'tpu' got unexpected options {sorted(kwargs)}")
    compiler = aot_autograd(
        fw_compiler=_graph_runner,
        bw_compiler=_graph_runner,
        inference_compiler=_graph_runner,
        decompositions=decompositions(),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )
    return compiler(gm, example_inputs)


def _on_tpu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "tpu"


def graph_uses_tpu(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """An input, or any value the graph computes (Dynamo's example values), is on tpu."""
    if any(_on_tpu(x) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        values = value if isinstance(value, (tuple, list)) else (value,)
        if any(_on_tpu(v) for v in values):
            return True
    return False


def default_backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """torch.compile's default backend once torch_tpu is loaded
    (torch._dynamo.backends.registry.set_default_backend): graphs on tpu go to "tpu";
    every other graph goes to inductor exactly as `torch.compile` would send it."""
    if graph_uses_tpu(gm, example_inputs):
        return tpu_backend(gm, example_inputs)
    inductor = torch._TorchCompileInductorWrapper(mode or "default", options, None)
    return inductor(gm, example_inputs)



