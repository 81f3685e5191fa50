"""torch.profiler with ProfilerActivity.PrivateUse1: device spans (programs, compiles, transfers) on a tpu:0
timeline of the exported chrome trace, nested in time inside record_function regions, as device time in
key_averages(); results unchanged (compared with CPU)."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torch_tpu
from torch_tpu import profiler as tpu_profiler


def _run(tmp_path, activities, n):
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(n))
    with profile(activities=activities) as prof:
        with record_function("region"):
            a = x.to("tpu")
            out = ((a @ a.t()).relu() + 1.0).cpu()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    torch.testing.assert_close(out, (x @ x.t()).relu() + 1.0)
    return prof, trace


def test_device_spans_in_the_chrome_trace(mode, tmp_path):
    # a shape no other test uses, so this run compiles (or loads from the persistent cache) its programs
    n = {"strict": 11, "debug": 13, "fused": 17}[mode]
    prof, trace = _run(tmp_path, [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], n)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    dev = tpu_profiler.device_events(trace)
    assert dev and all(names[e["pid"]] == "tpu:0" for e in dev)
    programs = [e for e in dev if e["cat"] == "kernel"]
    if mode == "fused":
        assert any(e["name"].startswith("fused graph (") for e in programs), programs
    else:
        assert {"aten::mm", "aten::add"} <= {e["name"] for e in programs}, programs
    transfers = {e["name"].split(" ")[0] for e in dev if e["cat"] == "gpu_memcpy"}
    assert transfers == {"host", "device"}  # host to device, device to host
    compiles = [e for e in dev if e["cat"] == "privateuse1_runtime"]
    assert compiles and all(e["name"].startswith(("compile ", "load from cache ")) for e in compiles)
    # the region (CPU, user annotation) encloses the launches of its programs
    region = next(e for e in trace["traceEvents"] if e.get("name") == "region" and e.get("ph") == "X"
                  and e.get("cat") == "user_annotation")
    for e in programs:
        # us since the epoch; the trace's ts count from baseTimeNanoseconds
        launched = float(e["args"]["launched"].split()[0]) - trace.get("baseTimeNanoseconds", 0) / 1000
        assert region["ts"] - 1 <= launched <= region["ts"] + region["dur"] + 1, (region, e)
        assert e["ts"] >= launched - 1 and e["dur"] >= 0
    # programs are device time, as CUDA kernels are, linked to the op that launched them (a flow arrow), so
    # the record_function region's device total includes them
    device_us = sum(evt.self_device_time_total for evt in prof.key_averages())
    assert device_us > 0
    assert any(e.get("cat") == "ac2g" and e.get("pid") == programs[0]["pid"] for e in trace["traceEvents"])
    region_avg = next(evt for evt in prof.key_averages() if evt.key == "region")
    assert region_avg.device_time_total > 0
    assert tpu_profiler.summary(trace).splitlines()[0].startswith("span")


def test_cpu_only_profiling_records_no_device_spans(mode, tmp_path):
    _, trace = _run(tmp_path, [ProfilerActivity.CPU], 8)
    assert tpu_profiler.device_events(trace) == []


def test_supported_activity():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
