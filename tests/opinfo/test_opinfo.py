"""PyTorch's OpInfo database on tpu, bounded for `make test`.

Runs every OpInfo at float32 (forward and gradients) and bfloat16 (forward), and the OpInfos with a complex64
entry in expected_pass.txt at complex64 (forward), over at most MAX_SAMPLES sample inputs each, in one worker process (compiles stay cached in memory; a crash or hang costs one row, see
harness.py), with the CPU fallback off. Every entry of expected_pass.txt must still pass: a regression fails its
own test item. New passes are printed; add them with

    python tests/opinfo/harness.py --max-samples 8 --expected tests/opinfo/expected_pass.txt

`make test-ops-full` runs all six dtypes and regenerates docs/op_coverage.md.
"""
import os
import sys
import time

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

DTYPES = ["float32", "bfloat16"]
MAX_SAMPLES = 8
REPORT_DIR = os.path.join(harness.ROOT, "build")
EXPECTED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected_pass.txt")


def _expected():
    with open(EXPECTED_FILE) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


# OPINFO_OPS=a,b,c restricts the run to those OpInfos (for working on an op; the full run is the default).
ONLY = {k for k in os.environ.get("OPINFO_OPS", "").split(",") if k}
EXPECTED = [e for e in _expected() if not ONLY or e.split()[0] in ONLY]


@pytest.fixture(scope="module")
def results():
    keys = {e.split()[0] for e in EXPECTED}
    t0 = time.time()
    jobs, unsupported = harness.list_jobs(DTYPES, {"float32"}, MAX_SAMPLES, ONLY or None)
    # complex64 runs the OpInfos with a complex64 entry only (the full complex sweep is `make test-ops-full`).
    ckeys = {e.split()[0] for e in EXPECTED if e.split()[1] == "complex64"}
    cjobs, _ = harness.list_jobs(["complex64"], set(), MAX_SAMPLES, ckeys)
    for j in cjobs:
        j["id"] = len(jobs)
        jobs.append(j)
    # Every OpInfo runs (new passes are reported), not only the expected ones.
    records = harness.run_jobs(jobs, timeout=120.0) + unsupported
    seconds = time.time() - t0
    by = {}
    for r in records:
        by[(r["key"], r["dtype"])] = r
    assert keys <= {k for k, _ in by}, f"expected_pass.txt names unknown OpInfos: {sorted(keys - {k for k, _ in by})}"
    return records, by, seconds


@pytest.mark.parametrize("entry", EXPECTED)
def test_expected_pass(results, entry):
    _, by, _ = results
    key, what = entry.split()
    if what == "grad":
        r = by[(key, "float32")]
        assert r.get("grad") == "pass", f"{key}: float32 gradient {r.get('grad')}: {r.get('grad_reason') or r['reason']}"
    else:
        r = by[(key, what)]
        assert r["status"] == "pass", f"{key} {what}: {r['status']}: {r['reason']}"


def test_report(results, capsys):
    records, _, seconds = results
    # `make test` leaves the same table as docs/op_coverage.md for its own dtypes in build/.
    os.makedirs(REPORT_DIR, exist_ok=True)
    report = os.path.join(REPORT_DIR, "op_coverage.md")
    harness.write_docs(report, records, DTYPES, {"torch": torch.__version__, "max_samples": MAX_SAMPLES,
                                                 "seconds": seconds, "generator": "`make test`"})
    now = harness.passing(records) | harness.passing(records, grad=True)
    new = sorted(now - set(EXPECTED))
    _, counts, grad = harness.summarize(records, DTYPES + ["complex64"])
    with capsys.disabled():
        print(f"\nOpInfo (max {MAX_SAMPLES} samples): " + "; ".join(
            f"{d} pass {counts[d].get('pass', 0)}" for d in DTYPES + ["complex64"]) + f"; float32 grad pass {grad.get('pass', 0)}"
              + f" (table: {report})")
        if new:
            print(f"{len(new)} new passes (add them to tests/opinfo/expected_pass.txt): " + ", ".join(new))
    # Nothing in the run may be a harness error, crash or hang.
    bad = [f"{r['key']} {r['dtype']}: {r['status']} {r['reason']}" for r in records
           if r["status"] in ("error", "crash", "timeout")]
    assert not bad, "\n".join(bad)
