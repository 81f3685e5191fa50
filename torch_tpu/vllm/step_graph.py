"""Step graphs: the model forward of a bucketed serving step as one captured program per bucket, launched
again without running vLLM's model code (what CUDA graphs are to vLLM on GPUs).

A step's forward reads only persistent storages: the model's weights, the KV caches and the runner's
device buffers (input ids, positions, query starts, sequence lengths, block tables, slot mappings), which
the host refills every step; attention derives its per-token tensors inside the forward
(attention.TpuAttentionMetadata.derived). So the forward, traced once inside a compiled-graph scope (one
program, whatever the eager mode) and captured (`_C._CapturedGraph`, the machinery of torch.compile's
replay: torch_tpu/compile/replay.py), can be launched on those storages' current buffers: the KV caches
are updated in place (donated), the hidden states come back as a new tensor.

A replay launches the program with every host value of the capture (a view offset, a scalar) as it was.
So a bucket is replayed only after two captures of it agree: the same program, the same storages and the
same host values (`fingerprint`); warm-up and serving steps carry different data, so a value the forward
computed from the step's data differs between them and the bucket keeps being traced (correct, slower).
A capture cut by a host read, or reading a storage that is not persistent, is never replayed either.

Keys: (token bucket, block-table widths). The request bucket does not reach the forward (query starts,
sequence lengths and the block table are read at their full size max_num_seqs).
TORCH_TPU_VLLM_STEP_GRAPHS=0 turns step graphs off (each mode's own eager path).
"""
import os

import torch

from .. import _C
from ..compile import replay


def enabled() -> bool:
    return os.environ.get("TORCH_TPU_VLLM_STEP_GRAPHS", "1") != "0"


class StepGraphs:
    MAX_CAPTURES = 4  # per key: a bucket whose captures never agree is traced from then on

    def __init__(self, runner):
        self._runner = runner
        self._plans = {}  # key -> _C._ReplayPlan, confirmed
        self._last = {}  # key -> the last capture's normalised fingerprint
        self._captures = {}  # key -> captures taken
        self._statics = None  # persistent device tensors, one per storage
        self._owners = None  # (model, input_batch, kv_caches) the statics were collected from
        self.stats = {"replays": 0, "captures": 0, "traced": 0}

    def run(self, key, forward):
        """forward()'s result: a replay of the key's program, or forward() traced (and captured)."""
        self._check_owners()
        plan = self._plans.get(key)
        if plan is not None:
            out = plan.run(list(self._statics))  # the list is cleared by the call (boxed convention)
            if out is not None and out is not False:
                self.stats["replays"] += 1
                return out[0]
            if out is None:  # a persistent buffer changed shape: capture again
                del self._plans[key]
                self._captures.pop(key, None)
        taken = self._captures.get(key, 0)
        if taken >= self.MAX_CAPTURES:
            self.stats["traced"] += 1
            return forward()
        self._captures[key] = taken + 1
        self.stats["captures"] += 1
        graph = _C._CapturedGraph()
        out = replay.traced(forward, graph)
        self._consider(key, graph, out)
        return out

    def _consider(self, key, graph, out):
        if not graph.complete:
            self._captures[key] = self.MAX_CAPTURES  # a host read inside the forward: never one program
            return
        addresses = self._addresses()
        if any(a and a not in addresses for a in graph.param_storages):
            self._collect()  # something persistent appeared since (a buffer made lazily): look again
            addresses = self._addresses()
        fingerprint = self._normalised(graph.fingerprint, addresses)
        agrees = self._last.get(key) == fingerprint
        self._last[key] = fingerprint
        if agrees:
            plan = replay.build_plan(graph, self._statics, out)
            if plan is not None:
                self._plans[key] = plan

    @staticmethod
    def _normalised(fingerprint, addresses):
        """The fingerprint with storages outside the persistent set (the new results) named by size only."""
        exe, params, results = fingerprint
        params = tuple(p if not p[0] or p[0] in addresses else ("new",) + p[1:] for p in params)
        results = tuple(r if r[0] in addresses else ("new", r[1]) for r in results)
        return exe, params, results

    def _addresses(self):
        if self._statics is None:
            self._collect()
        return {t.untyped_storage().data_ptr() for t in self._statics}

    def _check_owners(self):
        r = self._runner
        owners = (r.model, r.input_batch, r.kv_caches)
        if self._owners is not None and any(a is not b for a, b in zip(owners, self._owners)):
            # New weights, batch buffers or caches: every capture read the old ones.
            self._plans.clear()
            self._last.clear()
            self._captures.clear()
            self._statics = None

    def _collect(self):
        """The device tensors that outlive a step: the model's parameters, buffers and tensor attributes,
        the runner's device buffers and KV caches, the block tables' device buffers."""
        r = self._runner
        found = {}

        def add(x):
            if isinstance(x, torch.Tensor):
                if x.device.type == "tpu":
                    found.setdefault(x.untyped_storage().data_ptr(), x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    add(y)
            elif hasattr(x, "gpu") and hasattr(x, "cpu"):  # vLLM's CpuGpuBuffer
                add(x.gpu)

        for module in r.model.modules():
            for t in module.parameters(recurse=False):
                add(t)
            for t in module.buffers(recurse=False):
                add(t)
            for v in vars(module).values():
                if isinstance(v, torch.Tensor):
                    add(v)
        for v in vars(r).values():
            add(v)
        for table in r.input_batch.block_table.block_tables:
            add(table.block_table)
            add(table.slot_mapping)
        self._statics = list(found.values())
        self._owners = (r.model, r.input_batch, r.kv_caches)
