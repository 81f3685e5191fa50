"""Where PJRT plugins are found, in the order of DESIGN §1."""
import importlib.util
import os

ENV_VAR = "TORCH_TPU_PJRT_PLUGIN"


def _package_file(package: str, filename: str):
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, filename)
        if os.path.exists(path):
            return path
    return None


def _gpu_visible() -> bool:
    return os.path.exists("/dev/nvidia0") or os.path.exists("/proc/driver/nvidia/version")


def candidates():
    """(name, path) pairs to try, first to last. An explicit plugin is the only candidate."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return [(ENV_VAR, explicit)]
    found = []
    libtpu = _package_file("libtpu", "libtpu.so")
    if libtpu:
        found.append(("libtpu", libtpu))
    if _gpu_visible():
        for pkg in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
            path = _package_file(pkg, "xla_cuda_plugin.so")
            if path:
                found.append(("cuda", path))
                break
    for pkg, filename in (
        ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so"),
        ("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"),
    ):
        path = _package_file(pkg, filename)
        if path:
            found.append(("cpu", path))
    return found
