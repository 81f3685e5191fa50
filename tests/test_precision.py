"""Float32 matmul precision: torch.set_float32_matmul_precision's mapping, torch.tpu.precision regions, and the
precision_config printed in the StableHLO each mode compiles (read from TORCH_TPU_LOG=hlo in a subprocess,
since the log switch is read once per process)."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_tpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = textwrap.dedent(r"""
    import json, sys, torch, torch_tpu
    import torch.nn.functional as F
    results = {}
    torch.manual_seed(0)
    for mode in ("strict", "debug", "fused"):
        for i, prec in enumerate(("medium", "high", "highest")):
            # shapes unique per case, so each compiles (and logs) its own program
            a, b = torch.randn(3 + i, 5), torch.randn(5, 4 + ("strict", "debug", "fused").index(mode))
            sys.stderr.write(f"=== {mode} {prec}\n"); sys.stderr.flush()
            with torch_tpu.eager_mode(mode), torch.tpu.precision(prec):
                out = (a.to("tpu") @ b.to("tpu")).cpu()
            sys.stderr.flush()
            results[f"{mode} {prec}"] = (out - a @ b).abs().max().item()
    sys.stderr.write("=== end\n")
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def logged():
    env = dict(os.environ, TORCH_TPU_LOG="hlo", TORCH_TPU_CACHE="0", PYTHONPATH=ROOT + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    env.pop("TORCH_TPU_EAGER_MODE", None)
    p = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    sections = dict(re.findall(r"=== (\w+ \w+)\n(.*?)(?==== )", p.stderr, flags=re.S))
    return sections, json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("prec,config", [("medium", None), ("high", "HIGH"), ("highest", "HIGHEST")])
@pytest.mark.parametrize("mode_name", ["strict", "debug", "fused"])
def test_precision_config_in_the_module(logged, mode_name, prec, config):
    sections, errors = logged
    text = sections[f"{mode_name} {prec}"]
    dots = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    assert dots, text
    for line in dots:
        if config is None:
            assert "precision_config" not in line, line
        else:
            assert f"precision_config = [#stablehlo<precision {config}>, #stablehlo<precision {config}>]" in line
    # On the CPU plugin every precision computes float32 products: the result matches CPU's
    assert errors[f"{mode_name} {prec}"] < 1e-5


def test_region_sets_and_restores(mode):
    old = torch.get_float32_matmul_precision()
    a, b = torch.randn(6, 7), torch.randn(7, 5)
    with torch.tpu.precision("medium"):
        assert torch.get_float32_matmul_precision() == "medium"
        with torch.tpu.precision("highest"):  # nested regions
            assert torch.get_float32_matmul_precision() == "highest"
            out = a.to("tpu") @ b.to("tpu")
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == old
    torch.testing.assert_close(out.cpu(), a @ b)
    with pytest.raises(RuntimeError, match="inside"):
        with torch.tpu.precision("high"):
            raise RuntimeError("inside")
    assert torch.get_float32_matmul_precision() == old


def test_unknown_precision():
    with pytest.raises(ValueError, match="medium, high, highest"):
        with torch.tpu.precision("bf16"):
            pass


def test_cost_warning_names_the_passes_only_on_tpu():
    def dot(p):
        return f'"stablehlo.dot_general"(%a, %b) {{precision_config = [#stablehlo<precision {p}>, ' \
               f'#stablehlo<precision {p}>]}}'
    highest = torch_tpu._C._dot_precision_cost("tpu", dot("HIGHEST"))
    high = torch_tpu._C._dot_precision_cost("TPU v5 lite", dot("HIGH"))
    assert "6 bfloat16 passes" in highest and "\"highest\"" in highest and "torch.tpu.precision" in highest
    assert "3 bfloat16 passes" in high and "\"high\"" in high
    assert torch_tpu._C._dot_precision_cost("tpu", '"stablehlo.dot_general"(%a, %b)') == ""
    assert torch_tpu._C._dot_precision_cost("cpu", dot("HIGHEST")) == ""
    assert torch_tpu._C._dot_precision_cost("cuda", dot("HIGH")) == ""


def test_jax_op_dots_follow_the_region(mode):
    jax = pytest.importorskip("jax")
    from torch_tpu.pallas import _export
    sig = (((4, 8), torch.float32), ((8, 3), torch.float32))
    for prec, config in (("medium", None), ("high", "HIGH"), ("highest", "HIGHEST")):
        _, text = _export.export_text(lambda x, y: x @ y, sig, "tpu_test::mm", prec)
        dots = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
        assert dots
        for line in dots:
            if config is None:
                assert "precision_config" not in line or "DEFAULT" in line, line
            else:
                assert f"#stablehlo<precision {config}>" in line, line
