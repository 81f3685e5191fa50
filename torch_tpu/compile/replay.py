"""Replay of a compiled graph: after the first call has traced and flushed the graph
(one fused program), later calls launch that executable directly on the new input
buffers: no Python per op, no tracing, no module text (FusedGraph::replay).

The first call captures (`_C._CapturedGraph`) where each program parameter came from
(a storage, named by its allocator address = `untyped_storage().data_ptr()`, or a host
operand, or the index flag) and where each result went. `build_plan` maps them to
the graph's arguments and outputs once, in Python; when something cannot be mapped, the
graph keeps the traced path, which is always correct. The plan itself is C++
(`_C._ReplayPlan`, CompileBindings.cpp): each call checks that the arguments look as they
did at capture (dtype, sizes, strides, offsets, storage sizes, which arguments share a
storage, plain numbers' values), launches and rebuilds the outputs with no Python per
argument; a plan is kept per float32 matmul precision too. Otherwise the call is traced.

Random ops: each one's {seed, offset} operand is drawn again from the device's default
generator at every replay, in the traced order, so the generator advances as in eager.
Each graph keeps a plan per argument signature (bounded, `Plans`): a graph with symbolic
sizes has one per size bucket (buckets.py), or one per size when it runs at exact sizes.
The graph's tensor constants are arguments too (backend.constants_as_arguments).
Not replayed: graphs drawing from an explicit generator, graphs reading an argument that
nothing had written (its zeros are constants of the program), graphs with CPU-tensor
arguments (their values may become operands; backend.cpu_scalars_used_on_tpu moves the
0-dim ones that only feed tpu math to tpu first), graphs cut by a host read.
"""
import os

import torch

from .. import _C


def enabled() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_REPLAY", "1") not in ("0", "")


class Plans:
    """The replay plans of one graph: a graph compiled with dynamic shapes (or called on
    views at new offsets) meets a few signatures again and again. Bounded: arguments that
    never repeat stop being captured after MAX_PLANS captures."""
    MAX_PLANS = 16

    def __init__(self):
        self.plans = []  # (matmul precision, _C._ReplayPlan)
        self.captures = 0
        self._unreplayable_now = False  # the last run() matched a plan that could not launch

    def run(self, args):
        """The outputs of a replay, or None: then the call is traced (`should_capture` says
        whether that trace should also be captured)."""
        precision = torch.get_float32_matmul_precision()
        for p, plan in self.plans:
            if p != precision:
                continue
            out = plan.run(args)  # None: another signature; False: matched, cannot launch now
            if out is None:
                continue
            self._unreplayable_now = out is False
            return None if out is False else out
        self._unreplayable_now = False
        return None

    def should_capture(self, args) -> bool:
        """After a `run` that returned None: a new signature, under the bound, replayable."""
        return (not self._unreplayable_now and self.captures < self.MAX_PLANS
                and _C._ReplayPlan.replayable(args))

    def add(self, graph, args, out):
        self.captures += 1
        plan = build_plan(graph, args, out)
        if plan is not None:
            self.plans.append((torch.get_float32_matmul_precision(), plan))


def traced(body, graph=None):
    """body() traced into one program (a compiled-graph scope, in any eager mode), flushed at its end; that
    flush fills `graph` (a `_C._CapturedGraph`) when one is given. If body raises, what it traced still runs,
    so storages stay consistent."""
    _C._compiled_graph_begin()
    try:
        if graph is not None:
            _C._compiled_graph_capture(graph)
        out = body()
    except BaseException:
        try:
            _C._compiled_graph_end()
        except Exception:
            pass
        raise
    # Intermediates are freed by now (body's frame is gone): the program's results are the outputs, the
    # mutated inputs and what the caller keeps (activations saved for backward).
    _C._compiled_graph_end()
    return out


def build_plan(graph, args, out):
    """A `_C._ReplayPlan` for the captured `graph` called on `args` with result `out`; None
    when the capture cannot be mapped onto the arguments and outputs."""
    if not graph.complete or graph.uses_foreign_generator:
        return None
    arg_of = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            arg_of.setdefault(a.untyped_storage().data_ptr(), i)
    if any(addr in arg_of for addr in graph.zero_read_storages):
        return None  # read an argument before anything wrote it: its zeros are constants of the program
    params = []
    for addr in graph.param_storages:
        if addr == 0:
            params.append(-1)
        elif addr in arg_of:
            params.append(arg_of[addr])
        else:
            return None  # read a storage that is not an argument
    results, new_results = [], {}
    for r, addr in enumerate(graph.result_storages):
        if addr in arg_of:
            results.append(arg_of[addr])
        else:
            results.append(-1)
            new_results[addr] = r
    outputs, used = [], set()
    for o in (out if isinstance(out, (list, tuple)) else [out]):
        if isinstance(o, torch.Tensor):
            if o.device.type != "tpu":
                return None
            addr = o.untyped_storage().data_ptr()
            meta = (o.dtype, tuple(o.shape), o.stride(), o.storage_offset())
            same = next((i for i, a in enumerate(args) if a is o), None)
            if same is not None:  # the argument itself (an input saved for backward): the same object
                outputs.append(("same", same))
            elif addr in new_results:
                outputs.append(("new", new_results[addr], meta))
                used.add(new_results[addr])
            elif addr in arg_of:
                outputs.append(("arg", arg_of[addr], meta))
            elif o.numel() == 0:  # no elements, so no program writes it (a jagged feature's empty slice)
                outputs.append(("empty", o.device.index or 0, meta))
            else:
                return None  # an output the program did not write
        elif o is None or isinstance(o, (int, float, bool)):
            outputs.append(("value", o))
        else:
            return None
    if used != set(new_results.values()):
        return None  # a storage the program wrote that no output carries
    return _C._ReplayPlan(graph, list(args), params, results, outputs)
