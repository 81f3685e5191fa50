"""Replay of a compiled graph: after the first call has traced and flushed the graph
(one fused program), later calls launch that executable directly on the new input
buffers: no Python per op, no tracing, no module text (FusedGraph::replay).

The first call captures (`_C._CapturedGraph`) where each program parameter came from
(a storage, named by its allocator address = `untyped_storage().data_ptr()`, or a host
operand, or the index flag) and where each result went. `ReplayPlan.build` maps them to
the graph's arguments and outputs; when something cannot be mapped, the graph keeps the
traced path, which is always correct. A replay is used only when the arguments look as
they did at capture (dtype, sizes, strides, offsets, storage sizes, which arguments share
a storage) and float32 matmul precision is unchanged; otherwise the call is traced.

Random ops: each one's {seed, offset} operand is drawn again from the device's default
generator at every replay, in the traced order, so the generator advances as in eager.
Each graph keeps a plan per argument signature (bounded, `Plans`): with dynamic shapes a
signature includes the sizes' values, which the traced program holds as constants.
Not replayed: graphs drawing from an explicit generator, graphs with CPU-tensor
arguments (their values may become operands), graphs cut by a host read.
"""
import os

import torch

from .. import _C


def enabled() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_REPLAY", "1") not in ("0", "")


def signature(args):
    """What a replay must find as it was at capture; None when the arguments cannot be replayed."""
    storages = {}
    sig = []
    for a in args:
        if isinstance(a, (int, float, bool)):  # a symbolic size's value: traced in as a constant
            sig.append((type(a), a))
            continue
        if not isinstance(a, torch.Tensor) or a.device.type != "tpu":
            return None
        st = a.untyped_storage()
        addr = st.data_ptr()
        group = storages.setdefault(addr, len(storages))
        sig.append((a.dtype, a.shape, a.stride(), a.storage_offset(), st.nbytes(), a.device.index, group))
    return tuple(sig), torch.get_float32_matmul_precision()


class Plans:
    """The replay plans of one graph, by argument signature: a graph compiled with dynamic
    shapes (or called on views at new offsets) meets a few signatures again and again.
    Bounded: arguments that never repeat stop being captured after MAX_PLANS."""
    MAX_PLANS = 16

    def __init__(self):
        self.by_signature = {}
        self.captures = 0

    def lookup(self, args):
        """(plan or None, signature or None)."""
        sig = signature(args)
        return (self.by_signature.get(sig) if sig is not None else None), sig

    def should_capture(self, sig) -> bool:
        return sig is not None and self.captures < self.MAX_PLANS

    def add(self, sig, plan):
        self.captures += 1
        if plan is not None:
            self.by_signature[sig] = plan


class ReplayPlan:
    def __init__(self, graph, signature, params, results, outputs):
        self.graph = graph
        self.signature = signature
        self.params = params    # per program parameter: argument index, or None
        self.results = results  # per result: argument index (a mutated input), or None (new storage)
        self.outputs = outputs  # per graph output: ("new", r, meta) | ("arg", i, meta) | ("value", v)

    @staticmethod
    def build(graph, args, out, sig):
        """None when the capture cannot be mapped onto the arguments and outputs."""
        if not graph.complete or graph.uses_foreign_generator:
            return None
        arg_of = {}
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                arg_of.setdefault(a.untyped_storage().data_ptr(), i)
        params = []
        for addr in graph.param_storages:
            if addr == 0:
                params.append(None)
            elif addr in arg_of:
                params.append(arg_of[addr])
            else:
                return None  # read a storage that is not an argument
        results, new_results = [], {}
        for r, addr in enumerate(graph.result_storages):
            if addr in arg_of:
                results.append(arg_of[addr])
            else:
                results.append(None)
                new_results[addr] = r
        outputs, used = [], set()
        for o in (out if isinstance(out, (list, tuple)) else [out]):
            if isinstance(o, torch.Tensor):
                if o.device.type != "tpu":
                    return None
                addr = o.untyped_storage().data_ptr()
                meta = (o.dtype, tuple(o.shape), o.stride(), o.storage_offset())
                if addr in new_results:
                    outputs.append(("new", new_results[addr], meta))
                    used.add(new_results[addr])
                elif addr in arg_of:
                    outputs.append(("arg", arg_of[addr], meta))
                else:
                    return None  # an output the program did not write
            elif o is None or isinstance(o, (int, float, bool)):
                outputs.append(("value", o))
            else:
                return None
        if used != set(new_results.values()):
            return None  # a storage the program wrote that no output carries
        return ReplayPlan(graph, sig, params, results, outputs)

    def run(self, args):
        """The graph's outputs, or None when the replay cannot run (then the call is traced)."""
        inputs = [None if i is None else args[i] for i in self.params]
        targets = [None if i is None else args[i] for i in self.results]
        try:
            raw = _C._compiled_graph_replay(self.graph, inputs, targets)
        except (RuntimeError, ValueError):  # e.g. a donated buffer is shared now: trace instead
            return None
        outs = []
        for o in self.outputs:
            if o[0] == "value":
                outs.append(o[1])
                continue
            kind, index, (dtype, size, stride, offset) = o
            storage = (raw[index] if kind == "new" else args[index]).untyped_storage()
            outs.append(torch.empty(0, dtype=dtype, device=storage.device).set_(storage, offset, size, stride))
        args.clear()
        return outs
