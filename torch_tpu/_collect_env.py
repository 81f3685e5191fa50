"""`torch_tpu.collect_env()`: what this process finds, as a dict that json.dumps accepts.

Every section is collected on its own and a failure becomes that section's "error", so the report is
complete even when torch_tpu is broken (that is when it is needed). Anything that could crash or hang
the process — dlopen of every candidate plugin, importing vLLM or JAX — runs in a child process; only
the plugin the runtime picks is started here, as any tpu program would start it.
"""
import glob
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import signal
import stat
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

from . import _elf, _env_vars, _plugins

# Optional integrations: (module imported, distribution whose version is reported).
INTEGRATIONS = (("jax", "jax"), ("vllm", "vllm"), ("torchrec", "torchrec"),
                ("transformers", "transformers"), ("accelerate", "accelerate"))

_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pjrt_probe.py")
_MARK = "@@torch_tpu.doctor@@"
# Imported in a child so that a broken install (or a segfault in a native module) is reported, not fatal.
_IMPORT_CHECK = f"""
import importlib, json, sys, time
out = {{}}
for name in sys.argv[1:]:
    t0 = time.perf_counter()
    try:
        m = importlib.import_module(name)
        out[name] = {{"imports": True, "version": str(getattr(m, "__version__", "")) or None,
                     "path": getattr(m, "__file__", None)}}
    except BaseException as exc:
        out[name] = {{"imports": False, "error": (type(exc).__name__ + ": " + str(exc)).strip()[:2000]}}
    out[name]["seconds"] = round(time.perf_counter() - t0, 2)
print({_MARK!r} + json.dumps(out), flush=True)
"""


def _guard(fn: Callable, *args) -> Dict:
    try:
        return fn(*args)
    except Exception as exc:  # the report goes on; this section says what broke
        return {"error": f"{type(exc).__name__}: {exc}"}


def _died(rc: int) -> str:
    try:
        return f"crashed ({signal.Signals(-rc).name})" if rc < 0 else f"exited with status {rc}"
    except ValueError:
        return f"exited with status {rc}"


# --- build ----------------------------------------------------------------------------------------

def _torch_version_at(lib_dir: str) -> Optional[str]:
    """The version of the torch installed around `lib_dir` (torch/lib), read from torch/version.py."""
    try:
        with open(os.path.join(os.path.dirname(lib_dir), "version.py")) as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", f.read(), re.M)
        return m.group(1) if m else None
    except OSError:
        return None


def _pjrt_header_version() -> Dict:
    """PJRT_API_MAJOR/MINOR of the pjrt_c_api.h builds compile against (tools/configure.py: xla-cpu-pjrt's)."""
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    if spec is None or not spec.submodule_search_locations:
        return {"path": None, "pjrt_api_version": None}
    path = os.path.join(spec.submodule_search_locations[0], "include", "pjrt_c_api.h")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return {"path": None, "pjrt_api_version": None}
    v = [re.search(rf"#define PJRT_API_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR")]
    return {"path": path, "pjrt_api_version": ".".join(m.group(1) for m in v) if all(v) else None}


def _torch_section() -> Dict:
    import torch
    compiler = re.search(r"^\s*-\s*((?:GCC|clang|MSVC)[^\n]*)", torch.__config__.show(), re.M)
    return {"version": torch.__version__, "git_version": getattr(torch.version, "git_version", None),
            "cuda": torch.version.cuda, "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "compiler": compiler.group(1).strip() if compiler else None,
            "path": os.path.dirname(torch.__file__)}


def _torch_tpu_section() -> Dict:
    import torch
    import torch_tpu
    here = os.path.dirname(os.path.abspath(torch_tpu.__file__))
    out = {"version": torch_tpu.__version__, "path": here, "registered": bool(torch_tpu._registered)}
    ext = {"path": None, "loaded": False, "error": None}
    # The torch this build compiled against (tools/configure.py wrote it); None in a checkout configured
    # before it existed. A mismatch is not loaded: _C into another torch fails on a symbol, or crashes.
    try:
        from . import _build_info
        built = {"torch_version": _build_info.torch_version, "torch_cxx11_abi": _build_info.torch_cxx11_abi,
                 "torch_git_version": getattr(_build_info, "torch_git_version", None),
                 "python": getattr(_build_info, "python", None)}
    except ImportError:
        built = None
    out["built_against"] = built
    mismatch = torch_tpu._torch_mismatch(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI,
                                         built["torch_version"], built["torch_cxx11_abi"]) if built else None
    out["torch_mismatch"] = mismatch
    try:
        if mismatch:
            raise ImportError("not loaded: " + mismatch)
        from . import _C
        ext.update(path=_C.__file__, loaded=True)
        ext["runtime_version"] = _C._compile_cache_config()["torch_tpu_version"]
    except Exception as exc:  # ImportError, or an undefined symbol from another torch
        ext["error"] = f"{type(exc).__name__}: {exc}"
        found = glob.glob(os.path.join(here, "_C*.so"))
        ext["path"] = found[0] if found else None
    if ext["path"]:
        info = _elf.build_info(ext["path"])
        ext["compiler"] = info.get("compiler")
        ext["cxx11_abi"] = info.get("cxx11_abi")
        # The torch the extension was linked against: its RUNPATH entry that holds libtorch.
        origin = os.path.dirname(os.path.abspath(ext["path"]))
        runpath = [os.path.normpath(d.replace("$ORIGIN", origin)) for d in info.get("runpath", [])]
        lib = next((d for d in runpath if os.path.exists(os.path.join(d, "libtorch_cpu.so"))), None)
        ext["linked_torch_lib"] = lib
        ext["linked_torch_version"] = _torch_version_at(lib) if lib else None
        torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        ext["links_running_torch"] = bool(lib) and os.path.realpath(lib) == os.path.realpath(torch_lib)
        # A torch installed after the build keeps the folder but may change the ABI under _C.
        version_py = os.path.join(os.path.dirname(torch.__file__), "version.py")
        try:
            ext["torch_newer_than_extension"] = os.path.getmtime(version_py) > os.path.getmtime(ext["path"])
        except OSError:
            ext["torch_newer_than_extension"] = None
    out["extension"] = ext
    out["pjrt_header"] = _pjrt_header_version()
    return out


# --- plugins and devices --------------------------------------------------------------------------

def _start_probes(candidates) -> List:
    procs = []
    for _, path in candidates:
        procs.append(subprocess.Popen([sys.executable, "-I", _PROBE, path], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


def _probe_result(proc, timeout: float = 60.0) -> Dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"no answer from GetPjrtApi in {timeout:.0f} s", "crashed": True}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = err.strip().splitlines()[-1:] if err.strip() else []
    return {"error": f"loading it {_died(proc.returncode)}" + (f": {tail[0]}" if tail else ""),
            "crashed": True}


def _runtime_errors(message: str, candidates) -> Dict[str, str]:
    """Per-candidate reasons from the runtime's error ("  name (path): reason" lines, Runtime.cpp)."""
    reasons = {}
    for name, path in candidates:
        prefix = f"  {name} ({path}): "
        for line in message.splitlines():
            if line.startswith(prefix):
                reasons[path] = line[len(prefix):]
    return reasons


def _plugins_and_devices() -> Dict:
    import torch
    candidates = _plugins.candidates()
    probes = [_probe_result(p) for p in _start_probes(candidates)]
    out = {"explicit": os.environ.get(_plugins.ENV_VAR), "candidates": [], "chosen": None, "error": None}
    crashed = [c[1] for c, p in zip(candidates, probes) if p.get("crashed")]
    started = False
    if not _registered():
        out["error"] = "not started: device 'tpu' is not registered (the torch_tpu extension did not load)"
    elif crashed:
        # The runtime would dlopen it in this process too: report instead of crashing here.
        out["error"] = f"not started here: loading {', '.join(crashed)} crashed a child process"
    else:
        started = True
        try:
            torch.tpu.init()
        except Exception as exc:
            out["error"] = str(exc)
    chosen_path = None
    if out["error"] is None:
        from . import _C
        major, minor = _C._pjrt_api_version()
        chosen_path = _C._plugin_path()
        out["chosen"] = {"name": _C._plugin_name(), "path": chosen_path, "pjrt_api_version": f"{major}.{minor}",
                         "platform": _C._platform_name(), "platform_version": _C._platform_version(),
                         "stablehlo_versions": list(_C._plugin_stablehlo_versions()),
                         "host_malloc": _C._host_memory_policy()}
    reasons = _runtime_errors(out["error"] or "", candidates)
    status = "failed" if started else "not tried"
    for (name, path), probe in zip(candidates, probes):
        if path == chosen_path:
            status = "chosen"
        entry = {"name": name, "path": path, "exists": os.path.exists(path), "status": status,
                 "pjrt_api_version": probe.get("pjrt_api_version"), "error": None}
        if status == "failed":
            entry["error"] = reasons.get(path) or probe.get("error") or (
                "did not start (the runtime keeps the reason only when no plugin starts; "
                f"TORCH_TPU_PJRT_PLUGIN={path} shows it)")
        out["candidates"].append(entry)
        if status == "chosen":
            status = "not tried"
    if out["error"] is None:
        out["devices"] = _guard(_devices)
    return out


def _devices() -> Dict:
    import torch
    count = torch.tpu.device_count()
    name = torch.tpu.get_device_name()
    listed = []
    for i in range(count):
        free, total = torch.tpu.mem_get_info(i)
        listed.append({"index": i, "device": f"tpu:{i}", "name": name, "memory_total": total,
                       "memory_free": free})
    # One small op end to end (compile, run, read back): a plugin can load and still fail to compile.
    t0 = time.perf_counter()
    try:
        x = torch.arange(4, dtype=torch.float32, device="tpu")
        value = (x * 2).sum().item()
        smoke = {"ok": value == 12.0, "error": None if value == 12.0 else f"(arange(4)*2).sum() gave {value}"}
    except Exception as exc:
        smoke = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    smoke["seconds"] = round(time.perf_counter() - t0, 3)
    return {"count": count, "name": name, "devices": listed, "first_op": smoke}


# --- modes, cache, environment, integrations ------------------------------------------------------

def _registered() -> bool:
    import torch
    import torch_tpu
    return bool(torch_tpu._registered) and hasattr(torch, "tpu")


def _eager_section() -> Dict:
    import torch_tpu
    if not _registered():
        return {"error": "unknown: torch_tpu is not registered"}
    env = os.environ
    if env.get("TORCH_TPU_EAGER_MODE", "").strip():
        source = "TORCH_TPU_EAGER_MODE"
    elif env.get("TPU_LAUNCH_BLOCKING", "") not in ("", "0"):
        source = "TPU_LAUNCH_BLOCKING"
    elif env.get("TORCH_TPU_DEFER_AND_FUSE", "") not in ("", "0"):
        source = "TORCH_TPU_DEFER_AND_FUSE"
    else:
        source = "default"
    return {"mode": torch_tpu.get_eager_mode(), "available": torch_tpu.available_eager_modes(), "source": source}


def _permissions(path: str) -> Dict:
    """Mode, owner and what this process may do; for a missing folder, whether it can be created."""
    import pwd
    if os.path.isdir(path):
        st = os.stat(path)
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        return {"exists": True, "mode": stat.filemode(st.st_mode), "owner": owner,
                "readable": os.access(path, os.R_OK | os.X_OK), "writable": os.access(path, os.W_OK | os.X_OK)}
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.isdir(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    return {"exists": False, "creatable": os.access(parent, os.W_OK | os.X_OK), "nearest_parent": parent}


def _cache_section() -> Dict:
    from . import _C
    config = dict(_C._compile_cache_config())
    directory = config["directory"]
    out = {k: config[k] for k in ("enabled", "writable", "directory", "max_bytes", "note", "format_version")}
    if directory:
        info = _C._cache_dir_inspect(directory, False)
        out.update(entries=info["entries"], bytes=info["bytes"], invalid_entries=info["invalid_entries"],
                   temporary_files=info["temporary_files"])
        out["permissions"] = _permissions(directory)
    return out


def _start_imports():
    names = [m for m, _ in INTEGRATIONS if importlib.util.find_spec(m) is not None]
    if not names:
        return None, names
    proc = subprocess.Popen([sys.executable, "-c", _IMPORT_CHECK, *names], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, names


def _finish_imports(started, timeout: float = 300.0) -> Dict:
    proc, names = started
    results: Dict = {}
    if proc is not None:
        try:
            out, _ = proc.communicate(timeout=timeout)
            line = next((ln for ln in out.splitlines() if ln.startswith(_MARK)), None)
            if line is not None:
                results = json.loads(line[len(_MARK):])
            else:  # the child died on one of them: say on which, each alone
                for name in names:
                    results[name] = _finish_imports(_start_one(name), timeout).get(name, {})
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            results = {n: {"imports": False, "error": f"no import finished in {timeout:.0f} s"} for n in names}
    report = {}
    for module, dist in INTEGRATIONS:
        try:
            installed = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        entry = {"installed": installed, "imports": False, "version": None, "error": None}
        if module in results:
            entry.update(results[module])
        elif module not in names:
            entry["error"] = "not installed"
        report[module] = entry
    return report


def _start_one(name: str):
    proc = subprocess.Popen([sys.executable, "-c", _IMPORT_CHECK, name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, [name]


# --- the report -----------------------------------------------------------------------------------

def _judge(env: Dict) -> None:
    """Fills env["problems"] (tpu unusable: the doctor exits 1) and env["warnings"] (works, but check)."""
    problems, warnings = [], []
    tt = env["torch_tpu"]
    ext = tt.get("extension", {})
    if tt.get("torch_mismatch"):
        problems.append(tt["torch_mismatch"])
    elif tt.get("error") or not ext.get("loaded"):
        problems.append("the torch_tpu extension (_C) does not load: " + str(tt.get("error") or ext.get("error")))
    elif not tt.get("registered"):
        problems.append("torch_tpu did not register device 'tpu' (see the warning `import torch` printed)")
    p = env["plugins"]
    if p.get("error") and not problems:  # with no extension the runtime was not even tried
        problems.append(p["error"])
    dev = p.get("devices") or {}
    if not p.get("error") and "error" in dev:
        problems.append("the devices could not be listed: " + dev["error"])
    elif dev and dev.get("count", 0) == 0:
        problems.append("the plugin reports no devices")
    elif dev and not dev["first_op"]["ok"]:
        problems.append("a first op on tpu failed: " + str(dev["first_op"]["error"]))
    for c in p.get("candidates", []):
        if c["status"] == "failed" and p.get("chosen"):
            warnings.append(f"plugin {c['name']} ({c['path']}) did not start; running on {p['chosen']['name']}")
    torch_abi = env["torch"].get("cxx11_abi")
    if ext.get("cxx11_abi") is not None and torch_abi is not None and ext["cxx11_abi"] != torch_abi:
        warnings.append(f"_C uses CXX11 ABI={int(ext['cxx11_abi'])}, torch ABI={int(torch_abi)}: rebuild torch_tpu")
    if ext.get("runtime_version") and ext["runtime_version"] != tt.get("version"):
        warnings.append(f"_C is torch_tpu {ext['runtime_version']}, the Python package {tt.get('version')}: "
                        "a stale build")
    if ext.get("loaded") and not ext.get("links_running_torch"):
        warnings.append(f"_C was linked against the torch in {ext.get('linked_torch_lib')}, not the running one")
    if ext.get("torch_newer_than_extension"):
        warnings.append("torch's files are newer than _C: if torch was reinstalled or upgraded, rebuild torch_tpu")
    cache = env["compile_cache"]
    if cache.get("enabled") and not cache.get("writable"):
        warnings.append(f"compile cache {cache.get('directory')} is not writable: {cache.get('note') or ''}".rstrip())
    if env["environment"].get("unknown"):
        warnings.append("TORCH_TPU_* variables nothing reads (misspelt?): " + ", ".join(env["environment"]["unknown"]))
    env["problems"], env["warnings"] = problems, warnings
    env["ok"] = not problems


def collect_env(integrations: bool = True) -> Dict:
    """torch / torch_tpu build, plugins tried and chosen, devices, eager mode, compile cache, environment
    variables and optional integrations. Starts the tpu runtime (as the first tpu tensor would) and runs
    one small op; `integrations=False` skips the import checks (vLLM alone takes seconds)."""
    imports = _start_imports() if integrations else None  # runs while the rest is collected
    env: Dict = {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "torch": _guard(_torch_section),
        "torch_tpu": _guard(_torch_tpu_section),
    }
    # The cache is measured before the first op, which may add an entry to it.
    env["compile_cache"] = _guard(_cache_section)
    env["plugins"] = _guard(_plugins_and_devices)
    env["eager_mode"] = _guard(_eager_section)
    env["environment"] = _env_vars.report()
    env["integrations"] = _guard(_finish_imports, imports) if imports is not None else None
    _judge(env)
    return env
