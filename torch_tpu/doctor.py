"""What torch_tpu finds here, for when something does not work.

    python -m torch_tpu.doctor               the report as text
    python -m torch_tpu.doctor --json        the same as JSON (torch_tpu.collect_env())
    python -m torch_tpu.doctor --no-imports  without importing jax / vllm / ... (they take seconds)

Exit status 1 when tpu is unusable (no plugin starts, no device, or a first op fails), else 0.
"""
import argparse
import json
import sys
from typing import Dict, List, Optional

from ._collect_env import collect_env

__all__ = ["collect_env", "format_env", "main"]


def _size(n) -> str:
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return str(n)


def _abi(v) -> str:
    return "?" if v is None else str(int(v))


def _build_lines(env: Dict) -> List[str]:
    py, t, tt = env["python"], env["torch"], env["torch_tpu"]
    lines = ["Versions",
             f"  python        {py['version']} ({py['executable']}), {py['platform']}"]
    if "error" in t:
        lines.append(f"  torch         {t['error']}")
    else:
        git = f" git {t['git_version'][:10]}" if t.get("git_version") else ""
        cuda = f", CUDA {t['cuda']}" if t.get("cuda") else ""
        lines.append(f"  torch         {t['version']}{git}{cuda}, CXX11 ABI={_abi(t['cxx11_abi'])}, "
                     f"{t.get('compiler') or 'compiler ?'} ({t['path']})")
    if "error" in tt:
        lines.append(f"  torch_tpu     {tt['error']}")
        return lines
    lines.append(f"  torch_tpu     {tt['version']} ({tt['path']})")
    built = tt.get("built_against")
    if built:
        same = "NOT the running torch" if tt.get("torch_mismatch") else "the running torch's version and ABI"
        lines.append(f"  built for     torch {built['torch_version']}, CXX11 ABI={_abi(built['torch_cxx11_abi'])} ({same})")
    else:
        lines.append("  built for     unknown (no torch_tpu/_build_info.py: configured before it existed)")
    ext = tt["extension"]
    state = "loaded" if ext["loaded"] else f"does not load: {ext['error']}"
    lines.append(f"  _C            {ext['path'] or '(no _C*.so in the package)'}: {state}")
    if ext.get("path"):
        lines.append(f"                built with {ext.get('compiler') or 'compiler ?'}, "
                     f"CXX11 ABI={_abi(ext.get('cxx11_abi'))}"
                     + (f", runtime {ext['runtime_version']}" if ext.get("runtime_version") else ""))
        lib = ext.get("linked_torch_lib")
        which = "the running torch" if ext.get("links_running_torch") else "NOT the running torch"
        lines.append(f"                linked against torch {ext.get('linked_torch_version') or '?'} in {lib} ({which})"
                     if lib else "                linked against torch: no RUNPATH to a torch/lib folder")
    hdr = tt.get("pjrt_header") or {}
    lines.append(f"  pjrt_c_api.h  {hdr.get('pjrt_api_version') or '?'} ({hdr.get('path') or 'xla-cpu-pjrt not installed'})")
    return lines


def _plugin_lines(env: Dict) -> List[str]:
    p = env["plugins"]
    if "candidates" not in p:
        return ["Plugins", f"  {p.get('error')}"]
    how = (f"TORCH_TPU_PJRT_PLUGIN={p['explicit']}: the only candidate" if p["explicit"]
           else "TORCH_TPU_PJRT_PLUGIN unset; tried in this order")
    lines = [f"Plugins ({how})"]
    if not p["candidates"]:
        lines.append("  (none found: no libtpu, CUDA plugin or XLA CPU plugin installed)")
    for c in p["candidates"]:
        api = f"PJRT API {c['pjrt_api_version']}" if c["pjrt_api_version"] else "PJRT API ?"
        missing = "" if c["exists"] else " (file does not exist)"
        lines.append(f"  [{c['status']}] {c['name']}: {c['path']}{missing}, {api}")
        if c["error"]:
            lines.append(f"      {c['error']}")
    ch = p.get("chosen")
    if ch:
        shlo = ch["stablehlo_versions"]
        shlo_text = f", StableHLO {shlo[0]} (oldest read {shlo[1]})" if shlo and shlo[0] else ""
        lines.append(f"  runtime: plugin {ch['name']}, PJRT API {ch['pjrt_api_version']}, platform "
                     f"{ch['platform']} (version {ch['platform_version']}){shlo_text}")
        if ch.get("host_malloc"):
            lines.append(f"  host malloc: {ch['host_malloc']}")
    lines.append("")
    dev = p.get("devices")
    if dev is None:
        lines.append("Devices: none (the runtime did not start)")
    elif "error" in dev:
        lines.append(f"Devices: {dev['error']}")
    else:
        lines.append(f"Devices: {dev['count']} x {dev['name']}")
        for d in dev["devices"]:
            lines.append(f"  {d['device']}  memory {_size(d['memory_total'])} total, {_size(d['memory_free'])} free")
        op = dev["first_op"]
        lines.append(f"  first op (compile + run + read back): "
                     + (f"ok in {op['seconds']} s" if op["ok"] else f"FAILED: {op['error']}"))
    return lines


def _cache_lines(env: Dict) -> List[str]:
    c = env["compile_cache"]
    if "error" in c:
        return [f"Compile cache: {c['error']}"]
    state = "enabled" if c["enabled"] else "disabled"
    lines = [f"Compile cache: {state}, {c['directory'] or '(no folder)'}"
             + (f" ({c['note']})" if c.get("note") else "")]
    if c.get("directory"):
        bound = _size(c["max_bytes"]) if c["max_bytes"] else "unbounded"
        lines.append(f"  {c['entries']} entries, {_size(c['bytes'])} (bound {bound})"
                     + (f", {c['invalid_entries']} invalid" if c["invalid_entries"] else "")
                     + (f", {c['temporary_files']} temporary files" if c["temporary_files"] else ""))
        perm = c["permissions"]
        if perm["exists"]:
            can = ", ".join(w for w, ok in (("readable", perm["readable"]), ("writable", perm["writable"])) if ok)
            lines.append(f"  {perm['mode']} {perm['owner']}; this process: {can or 'no access'}")
        else:
            lines.append(f"  does not exist yet; {'can' if perm['creatable'] else 'CANNOT'} be created "
                         f"(nearest folder {perm['nearest_parent']})")
    return lines


def _rest_lines(env: Dict) -> List[str]:
    e = env["eager_mode"]
    lines = [f"Eager mode: {e['error']}" if "error" in e else
             f"Eager mode: {e['mode']} (from {e['source']}; available: {', '.join(e['available'])})", ""]
    vars_set = env["environment"]["set"]
    lines.append("Environment variables that change behaviour" + ("" if vars_set else ": none set"))
    for name, v in vars_set.items():
        lines.append(f"  {name}={v['value']}    # {v['meaning']}")
    lines.append("")
    integ = env["integrations"]
    if integ is None:
        lines.append("Optional integrations: not checked (--no-imports)")
    elif "error" in integ:
        lines.append(f"Optional integrations: {integ['error']}")
    else:
        lines.append("Optional integrations (imported in a child process)")
        for name, r in integ.items():
            if r["imports"]:
                state = f"{r['version'] or r['installed'] or '?'}, imports ({r['seconds']} s)"
            elif r["installed"] or r["error"] != "not installed":
                state = f"{r['installed'] or '?'} installed, import FAILS: {r['error']}"
            else:
                state = "not installed"
            lines.append(f"  {name:<13} {state}")
    return lines


def format_env(env: Dict) -> str:
    """The text `python -m torch_tpu.doctor` prints for a collect_env() result."""
    dev = (env["plugins"].get("devices") or {})
    if env["ok"]:
        head = f"torch_tpu doctor: OK, tpu works ({dev.get('count')} devices: {dev.get('name')})"
    else:
        head = "torch_tpu doctor: tpu is NOT usable"
    lines = [head, ""]
    for part in (_build_lines, _plugin_lines, _cache_lines, _rest_lines):
        lines += part(env) + [""]
    for title, items in (("Problems (tpu unusable)", env["problems"]), ("Warnings", env["warnings"])):
        if items:
            lines.append(title)
            lines += ["  - " + item.replace("\n", "\n    ") for item in items]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.doctor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print collect_env() as JSON")
    parser.add_argument("--no-imports", action="store_true",
                        help="do not import the optional integrations (jax, vllm, torchrec, transformers, ...)")
    ns = parser.parse_args(argv)
    env = collect_env(integrations=not ns.no_imports)
    sys.stdout.write(json.dumps(env, indent=2) + "\n" if ns.json else format_env(env))
    sys.stdout.flush()
    return 0 if env["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
