#!/usr/bin/env bash
# Installs torch_tpu the way a user does, away from this checkout and its .venv (`make test-wheel`):
#   1. git clone of the committed HEAD into a temporary folder (uncommitted changes are not tested);
#   2. a build venv in the clone (.venv: torch 2.13.0 CPU, xla-cpu-pjrt, cmake, ninja, setuptools, wheel),
#      `pip wheel --no-build-isolation .` there;
#   3. a fresh venv with only torch 2.13.0 CPU + xla-cpu-pjrt, the wheel installed into it, and from
#      outside any source tree: a smoke test (tensor on tpu, backward, a fused-mode step,
#      torch.compile(backend="tpu")), `python -m torch_tpu.doctor` (exit 0), then the build-info check
#      (a wheel that says it was built for another torch: `import torch` warns and still works,
#      `import torch_tpu` raises ImportError naming both versions, the doctor exits 1 saying so), and a
#      dry-run resolution of the extras (cpu, jax, vllm) that must keep torch as it is;
#   4. `pip install --no-build-isolation .` from a clean clone into the build venv (torch preinstalled),
#      and the smoke test there.
# The build venv lives inside the clone at .venv, like `make build`'s, so that ccache (CCACHE_BASEDIR =
# the clone) finds the objects any checkout's `make build` compiled: with a warm cache the builds link only.
# Every step has a timeout; any failure stops the script with a message and a non-zero status.
# KEEP=1 keeps the temporary folder.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON_SYS=${PYTHON_SYS:-python3.11}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PLUGIN_SPEC=${PLUGIN_SPEC:-xla-cpu-pjrt==0.0.1}
STEP_TIMEOUT=${STEP_TIMEOUT:-600}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/torch_tpu-ccache}
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH
# The developer's TORCH_TPU_* settings (eager mode, cache folder, plugin) do not apply to a user's install.
for v in $(env | sed -n 's/^\(TORCH_TPU_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done

T=$(mktemp -d /tmp/torch_tpu-wheel.XXXXXX)
export TORCH_TPU_CACHE_DIR=$T/cache
cleanup() { if [ "${KEEP:-0}" = 1 ]; then echo "test_wheel: kept $T"; else rm -rf "$T"; fi; }
trap cleanup EXIT
t0=$(date +%s)
step() { echo "=== test_wheel [$(( $(date +%s) - t0 ))s] $*"; }
fail() { echo "test_wheel: FAILED: $*" >&2; exit 1; }
run() { timeout "$STEP_TIMEOUT" "$@" || fail "exit status $? from: $*"; }

COMMIT=$(git -C "$ROOT" rev-parse HEAD)
step "clone $COMMIT into $T/src"
run git clone -q --no-hardlinks "$ROOT" "$T/src"
run git -C "$T/src" checkout -q --detach "$COMMIT"
SRC=$T/src
export CCACHE_BASEDIR=$SRC

new_venv() {  # new_venv DIR PACKAGES...: a venv with these packages; fails on a CUDA torch
  local dir=$1; shift
  run "$PYTHON_SYS" -m venv "$dir"
  run "$dir/bin/python" -m pip install -q "$@"
  run "$dir/bin/python" -c "import torch; assert torch.version.cuda is None, 'a CUDA torch: ' + torch.__version__"
}

step "build venv $SRC/.venv: $TORCH_SPEC (CPU), $PLUGIN_SPEC, build tools"
new_venv "$SRC/.venv" "$TORCH_SPEC" "$PLUGIN_SPEC" numpy cmake ninja setuptools wheel
BPY=$SRC/.venv/bin/python
TORCH_VERSION=$("$BPY" -c "import torch; print(torch.__version__)")

step "pip wheel --no-build-isolation . (ccache: $CCACHE_DIR)"
command -v ccache >/dev/null && ccache -z >/dev/null
(cd "$SRC" && run "$BPY" -m pip wheel -q --no-build-isolation --no-deps -w "$T/dist" .)
command -v ccache >/dev/null && ccache -s | sed -n '1,3p'
WHEEL=$(ls "$T"/dist/torch_tpu-*.whl) || fail "no wheel in $T/dist"
echo "wheel: $WHEEL"
"$BPY" - "$WHEEL" "$TORCH_VERSION" <<'EOF' || fail "the wheel's contents or metadata"
import sys, zipfile
whl, torch_version = sys.argv[1:]
names = zipfile.ZipFile(whl).namelist()
assert any(n.startswith("torch_tpu/_C.") and n.endswith(".so") for n in names), names
assert "torch_tpu/_build_info.py" in names, names
meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
pin = "Requires-Dist: torch==" + torch_version.split("+")[0]
assert pin in meta.splitlines(), (pin, meta)
info = zipfile.ZipFile(whl).read("torch_tpu/_build_info.py").decode()
assert repr(torch_version) in info, info
for extra in ("cpu", "jax", "vllm"):
    assert f"Provides-Extra: {extra}" in meta, extra
print("wheel ok:", pin, "+ _C, _build_info.py, extras cpu/jax/vllm")
EOF

# The smoke test: run from $T/work (no torch_tpu folder on sys.path but the installed one).
mkdir -p "$T/work"
cat > "$T/work/smoke.py" <<'EOF'
import os, sys
import torch
import torch_tpu
here = os.path.dirname(os.path.abspath(torch_tpu.__file__))
assert "site-packages" in here, here
print("torch", torch.__version__, "torch_tpu", torch_tpu.__version__, "from", here)
x = torch.randn(4, 3, device="tpu", requires_grad=True)
assert x.device.type == "tpu"
(x * x).sum().backward()
assert torch.allclose(x.grad.cpu(), 2 * x.detach().cpu()), "backward"
# One training step in fused mode against the same step on CPU.
torch.manual_seed(0)
ref = torch.nn.Linear(3, 2)
model = torch.nn.Linear(3, 2).to("tpu")
model.load_state_dict(ref.state_dict())
data = torch.randn(8, 3)
def step(m, d):
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m(d).square().mean().backward()
    opt.step()
step(ref, data)
with torch_tpu.eager_mode("fused"):
    step(model, data.to("tpu"))
    torch.tpu.synchronize()
assert torch_tpu._C._fused_stats()["fused_ops"] > 0, torch_tpu._C._fused_stats()
assert torch.allclose(model.weight.detach().cpu(), ref.weight.detach(), atol=1e-5), "fused step"
f = torch.compile(lambda a: torch.sin(a) * 2 + a, backend="tpu")
a = torch.randn(5)
assert torch.allclose(f(a.to("tpu")).cpu(), torch.sin(a) * 2 + a, atol=1e-5), "torch.compile"
print("smoke ok: tensor, backward, fused step, torch.compile(backend='tpu') on", torch.tpu.get_device_name())
EOF

RUNV=$T/run
step "fresh venv $RUNV: $TORCH_SPEC (CPU) + $PLUGIN_SPEC only, then the wheel"
new_venv "$RUNV" "$TORCH_SPEC" "$PLUGIN_SPEC"
RPY=$RUNV/bin/python
before=$("$RPY" -m pip freeze | grep -i '^torch==' || true)
run "$RPY" -m pip install -q "$WHEEL"
after=$("$RPY" -m pip freeze | grep -i '^torch==' || true)
[ "$before" = "$after" ] || fail "installing the wheel changed torch: $before -> $after"

step "smoke test in $RUNV (cwd $T/work)"
(cd "$T/work" && run "$RPY" smoke.py)
step "python -m torch_tpu.doctor in $RUNV"
(cd "$T/work" && run "$RPY" -m torch_tpu.doctor --no-imports) > "$T/doctor.txt" 2>&1 || { cat "$T/doctor.txt"; fail "doctor"; }
grep -E "^torch_tpu doctor|built for" "$T/doctor.txt"

step "a wheel built for another torch: import torch warns, import torch_tpu raises, the doctor exits 1"
INFO=$(cd "$T/work" && "$RPY" -I -c "import importlib.util as u; print(u.find_spec('torch_tpu').submodule_search_locations[0])")/_build_info.py
case "$INFO" in "$RUNV"/*) ;; *) fail "the installed torch_tpu is not in $RUNV: $INFO" ;; esac
cp "$INFO" "$T/build_info.orig"
sed -i "s/^torch_version = .*/torch_version = '2.12.0+cpu'/" "$INFO"
grep -q "^torch_version = '2.12.0+cpu'" "$INFO" || fail "could not edit $INFO"; rm -rf "$(dirname "$INFO")/__pycache__"
(cd "$T/work" && timeout 120 "$RPY" -c "import torch; print('import torch ok')") > "$T/mm1.txt" 2>&1 \
  || { cat "$T/mm1.txt"; fail "import torch failed with a mismatched torch_tpu"; }
grep -q "import torch ok" "$T/mm1.txt" && grep -q "built against torch 2.12.0+cpu" "$T/mm1.txt" \
  || { cat "$T/mm1.txt"; fail "import torch did not warn about the mismatch"; }
if (cd "$T/work" && timeout 120 "$RPY" -c "import torch_tpu") > "$T/mm2.txt" 2>&1; then
  cat "$T/mm2.txt"; fail "import torch_tpu succeeded with a mismatched torch"; fi
grep -q "ImportError: torch_tpu .* was built against torch 2.12.0+cpu .* this Python has torch $TORCH_VERSION" "$T/mm2.txt" \
  || { cat "$T/mm2.txt"; fail "import torch_tpu did not raise the mismatch ImportError"; }
if (cd "$T/work" && timeout 300 "$RPY" -m torch_tpu.doctor --no-imports) > "$T/mm3.txt" 2>&1; then
  cat "$T/mm3.txt"; fail "the doctor exited 0 with a mismatched torch"; fi
grep -q "built against torch 2.12.0+cpu" "$T/mm3.txt" || { cat "$T/mm3.txt"; fail "the doctor did not name the mismatch"; }
cp "$T/build_info.orig" "$INFO"
tail -n 2 "$T/mm2.txt" | cut -c1-160

step "extras resolve without changing torch (pip install --dry-run)"
for extra in cpu jax vllm; do
  timeout "$STEP_TIMEOUT" "$RPY" -m pip install -q --dry-run --report "$T/extra-$extra.json" "$WHEEL[$extra]" \
    > "$T/extra-$extra.log" 2>&1 || { cat "$T/extra-$extra.log"; fail "extra $extra does not resolve"; }
  "$RPY" - "$T/extra-$extra.json" "$extra" <<'EOF' || fail "extra changes torch"
import json, sys
report = json.load(open(sys.argv[1]))
names = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
assert "torch" not in names, f"extra {sys.argv[2]} would install torch {names.get('torch')}"
print(f"extra {sys.argv[2]}: {len(names)} packages to install, torch kept")
EOF
done

step "pip install --no-build-isolation . from a clean clone into $SRC/.venv (torch preinstalled)"
run git -C "$SRC" clean -qfdx -e .venv
(cd "$SRC" && run "$BPY" -m pip install -q --no-build-isolation .)
(cd "$T/work" && run "$BPY" smoke.py)
(cd "$T/work" && run "$BPY" -m torch_tpu.doctor --no-imports) > "$T/doctor2.txt" 2>&1 || { cat "$T/doctor2.txt"; fail "doctor after pip install ."; }
head -n 1 "$T/doctor2.txt"

step "OK ($(( $(date +%s) - t0 )) s)"
