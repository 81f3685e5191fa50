"""Device spans in torch.profiler traces, and a summary of them.

`torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])` (PrivateUse1 prints
as ProfilerActivity.TPU once the backend is renamed) records, on top of the CPU ops and record_function
regions: every program's execution (kineto category "kernel", named by its op — "aten::mm" — or
"fused graph (N ops, reason)" / "compiled graph (replay)"), every compile or compile-cache load
("privateuse1_runtime") and every host<->device transfer ("gpu_memcpy"), on a "tpu:N" process of the
chrome trace (rows: programs, compiles, transfers). Programs count as device time in key_averages()
("Self TPU"). Spans are host-observed: a program runs from its launch (or the end of the previous program on
that device) until its outputs are ready (PJRT_Event_OnReady), which on an asynchronous device includes any
time it waited behind other work.
"""
from __future__ import annotations

import collections
import json

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "privateuse1_runtime")


def device_events(trace) -> list[dict]:
    """The device spans of an exported chrome trace (a path or the loaded dict)."""
    if isinstance(trace, str):
        with open(trace, encoding="utf-8") as f:
            trace = json.load(f)
    devices = {e["pid"] for e in trace.get("traceEvents", [])
               if e.get("ph") == "M" and e.get("name") == "process_name"
               and str(e.get("args", {}).get("name", "")).startswith("tpu:")}
    return [e for e in trace.get("traceEvents", [])
            if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES and e.get("pid") in devices]


def summary(trace, top: int = 10) -> str:
    """A table of the device spans with the most total time: name, category, count, total and mean (ms)."""
    totals = collections.defaultdict(lambda: [0, 0.0])
    for e in device_events(trace):
        t = totals[(e["name"], e["cat"])]
        t[0] += 1
        t[1] += float(e.get("dur", 0)) / 1000.0
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]
    width = max([len(n) for (n, _), _ in rows] + [4])
    lines = [f"{'span':<{width}}  {'category':<19}  {'count':>6}  {'total ms':>9}  {'mean ms':>8}"]
    for (name, cat), (n, ms) in rows:
        lines.append(f"{name:<{width}}  {cat:<19}  {n:>6}  {ms:>9.3f}  {ms / n:>8.3f}")
    return "\n".join(lines)
