"""A fixed seed set of the differential fuzzer (tools/fuzz.py) in every mode.

Each seed is a random program of 5-60 ops (views, in-place writes through views, aliasing, broadcasting,
0-size shapes, bfloat16/float16/int/bool, backward, RNG) that must give CPU's values, gradients, view strides
and errors in Strict, Debug, Fused and compiled (called twice, so the second call replays). `make fuzz` runs
thousands; these seeds keep every mode honest in `make test`. The programs run in tools/fuzz.py's worker
subprocess (a crash or hang is a reported failure of one seed, never of pytest), with shrinking off: a failure
names the seed, and `python tools/fuzz.py --seeds S:S+1 --modes M` shrinks it to a reproducer.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = (0, 40)


@pytest.mark.parametrize("m", ["strict", "debug", "fused", "compile"])
def test_fixed_seeds(m, tmp_path):
    out = tmp_path / "results.json"
    cmd = [sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seeds", f"{SEEDS[0]}:{SEEDS[1]}",
           "--modes", m, "--jobs", "1", "--shrink-budget", "0", "--timeout", "300", "--out", str(tmp_path),
           "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    results = json.loads(out.read_text())["results"] if out.exists() else []
    assert len(results) == SEEDS[1] - SEEDS[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    # compile skips a program with an op CPU rejects (a compiled function raises as a whole)
    assert all(r["modes"] == [m] or (m == "compile" and not r["modes"]) for r in results if not r["fails"])
    failing = {r["seed"]: r["fails"] for r in results if r["fails"]}
    assert not failing and proc.returncode == 0, proc.stdout[-6000:]


# ---- regression tests: bugs the fuzzer found, from their shrunk reproducers ----------------------

def test_fill_on_an_expanded_view_writes_every_alias(mode):
    # Seed 4: zero_/fill_ on an expanded view wrote only the view's first alias. CPU writes them all
    # (the Scalar overload allows overlap, fill is idempotent); the Tensor overload refuses it.
    for dev in ("cpu", "tpu"):
        b = torch.arange(3.0, device=dev).reshape(3, 1).clone()
        b.expand(3, 4).fill_(2.5)
        got = [b.cpu().clone()]
        b.t().expand(2, 3).zero_()
        got.append(b.cpu().clone())
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch.arange(6.0, device=dev).reshape(3, 2)[:, :1].expand(3, 5).fill_(torch.tensor(7.0, device=dev))
        if dev == "cpu":
            expected = got
    assert all(torch.equal(g, e) for g, e in zip(got, expected)), (got, expected)
