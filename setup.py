"""`pip install --no-build-isolation .` / `pip wheel --no-build-isolation .`: builds torch_tpu._C with CMake
against the torch installed in the running Python, like other PyTorch extensions.

build_ext runs the configure step `make build` runs (tools/configure.py: CMake in <checkout>/build, also
writing torch_tpu/_build_info.py), then `cmake --build build --target _C` (ccache when installed), and puts
_C*.so and _build_info.py into the package. The metadata lives in pyproject.toml; this file adds what
depends on the build: the torch pin (the version compiled against) and the extras.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# The torch every file in this checkout is written for; a build against another one is refused below.
TORCH_VERSION = "2.13.0"


def _read_requirements(name: str) -> list:
    out = []
    with open(os.path.join(ROOT, name)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def _torch_pin() -> str:
    """torch==<the version this build compiles against> (its local label, +cpu, dropped: the CUDA build
    of the same release has the same C++ ABI)."""
    try:
        import torch
    except ImportError:  # metadata without torch (an isolated build env lists it as a build requirement)
        return f"torch=={TORCH_VERSION}"
    return "torch==" + torch.__version__.split("+", 1)[0]


def _extras() -> dict:
    # vllm's own metadata pins CUDA packages, torchvision/torchaudio for an older torch and an older
    # transformers: `pip install torch_tpu[vllm]` installs its runtime requirements (requirements-vllm.txt)
    # with transformers held, and vllm itself goes on top with `pip install --no-deps vllm==0.32.0`.
    held = [r for r in _read_requirements("constraints-vllm.txt") if not r.startswith("torch")]
    return {
        "cpu": ["xla-cpu-pjrt==0.0.1"],  # the XLA CPU PJRT plugin (also ships the pjrt_c_api.h builds use)
        # torch_tpu.pallas: JAX functions and Pallas kernels as torch ops (export only).
        "jax": ["jax==0.8.1", "jaxlib==0.8.1"],
        "vllm": _read_requirements("requirements-vllm.txt") + held,
        # TorchRec on tpu: torchrec's metadata asks for the CUDA fbgemm-gpu, so the extra installs fbgemm's
        # CPU build and torchrec's other runtime requirements (requirements-torchrec.txt, torch held by the
        # core pin); torchrec itself goes on top with `pip install --no-deps torchrec==1.9.2`.
        "torchrec": _read_requirements("requirements-torchrec.txt"),
    }


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import sysconfig
        import torch
        base = torch.__version__.split("+", 1)[0]
        if base != TORCH_VERSION:
            sys.exit(f"torch_tpu {self.distribution.get_version()} builds against torch {TORCH_VERSION}; this "
                     f"Python has torch {torch.__version__}. Install torch=={TORCH_VERSION} (CPU: pip install "
                     f"torch=={TORCH_VERSION} --index-url https://download.pytorch.org/whl/cpu) and build with "
                     "--no-build-isolation.")
        # As the Makefile: one compiler cache for every clone, paths rewritten relative to the checkout.
        os.environ.setdefault("CCACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "torch_tpu-ccache"))
        basedir = os.environ.get("CCACHE_BASEDIR")
        if not basedir or os.path.relpath(ROOT, basedir).startswith(os.pardir):  # e.g. another clone's Makefile
            os.environ["CCACHE_BASEDIR"] = ROOT
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        try:
            import configure
        finally:
            sys.path.pop(0)
        build_dir = os.path.join(ROOT, "build")
        configure.configure(build_dir)
        cmd = ["cmake", "--build", build_dir, "--target", "_C"]
        if self.parallel:
            cmd += ["--parallel", str(self.parallel)]
        subprocess.check_call(cmd)
        built = os.path.join(ROOT, "torch_tpu", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        for src, dst in ((built, dest),
                         (os.path.join(ROOT, "torch_tpu", "_build_info.py"),
                          os.path.join(os.path.dirname(dest), "_build_info.py"))):
            if not os.path.exists(dst) or not os.path.samefile(src, dst):
                shutil.copy2(src, dst)


setup(
    ext_modules=[CMakeExtension("torch_tpu._C")],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=[_torch_pin(), "numpy"],
    extras_require=_extras(),
)
