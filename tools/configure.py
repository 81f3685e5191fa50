"""Configures the CMake build against the venv's torch and PJRT header."""
import os
import subprocess
import sys
import sysconfig

import torch
import importlib.util


def main(build_dir: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    if spec is None:
        sys.exit("xla-cpu-pjrt is not installed: it ships the pjrt_c_api.h we build against")
    plugin_dir = spec.submodule_search_locations[0]
    torch_dir = os.path.dirname(torch.__file__)
    args = [
        "cmake", "-S", root, "-B", build_dir, "-G", "Ninja",
        f"-DPJRT_INCLUDE_DIR={os.path.join(plugin_dir, 'include')}",
        f"-DTPU_TEST_PLUGIN={os.path.join(plugin_dir, 'xla_cpu_pjrt.so')}",
        f"-DTORCH_DIR={torch_dir}",
        f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-DPYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
        f"-DPYTHON_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
        f"-DTPU_OUTPUT_DIR={os.path.join(root, 'torch_tpu')}",
    ]
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        subprocess.check_call(args)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
