"""tests/models: the Hugging Face model coverage suite (model_zoo.py, test_models_hf.py).

`make test` runs the representative subset (model_zoo entries marked `quick`); TORCH_TPU_MODELS=all runs every
architecture (TORCH_TPU_MODELS=bert,t5: those), and TORCH_TPU_MODEL_COVERAGE=path (`make test-models`) rewrites the coverage table there after
each test, so an interrupted run still leaves the rows it finished. Tests run architecture by architecture
(all modes of one, then the next). Fixtures of tests/conftest.py (`mode`, ...) apply here too; its helpers
are re-exported, as in tests/compile/conftest.py (`import conftest` finds this module in this folder).
"""
import importlib.util
import os

import model_zoo

_spec = importlib.util.spec_from_file_location(
    "_tpu_tests_conftest_models",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conftest.py"))
_parent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_parent)
# Every helper the tests import by name: in a whole-tree run `conftest` may resolve to this module for any test.
assert_close = _parent.assert_close
to_tpu = _parent.to_tpu
nonfinite_ok = _parent.nonfinite_ok
EAGER_MODES = _parent.EAGER_MODES


def _arch(item):
    arch = getattr(getattr(item, "callspec", None), "params", {}).get("arch")
    return arch if isinstance(arch, model_zoo.Arch) else None


def _selected(arch):
    chosen = os.environ.get("TORCH_TPU_MODELS", "")
    if chosen == "all":
        # TORCH_TPU_MODELS_CHUNK=i/n: the i-th of n consecutive slices of the table (`make test-models` runs each
        # slice in its own process: one process running every architecture holds more memory mappings, from
        # the XLA:CPU programs it keeps loaded, than Linux's vm.max_map_count allows and crashes).
        chunk = os.environ.get("TORCH_TPU_MODELS_CHUNK")
        if not chunk:
            return True
        i, n = map(int, chunk.split("/"))
        k = [a.name for a in model_zoo.ARCHS].index(arch.name)
        return k * n // len(model_zoo.ARCHS) == i
    if chosen:  # a comma-separated list of architecture names
        return arch.name in chosen.split(",")
    return arch.quick


def pytest_collection_modifyitems(config, items):
    drop = [i for i in items if _arch(i) is not None and not _selected(_arch(i))]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if i not in set(drop)]
    order = {a.name: k for k, a in enumerate(model_zoo.ARCHS)}
    items.sort(key=lambda i: order[_arch(i).name] if _arch(i) is not None else -1)  # stable: modes in order


def pytest_runtest_logreport(report):
    path = os.environ.get("TORCH_TPU_MODEL_COVERAGE")
    if path and report.when == "teardown" and model_zoo.RESULTS:
        import coverage_table

        coverage_table.write(path, model_zoo.RESULTS)
