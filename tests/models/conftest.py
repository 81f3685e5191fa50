"""tests/models: the Hugging Face model coverage suite (model_zoo.py, test_models_hf.py).

`make test` runs the representative subset (model_zoo entries marked `quick`); TORCH_TPU_MODELS=all runs every
architecture, and TORCH_TPU_MODEL_COVERAGE=path writes the coverage table there at the end of the session
(`make test-models`). Fixtures of tests/conftest.py (`mode`, ...) apply here too.
"""
import os

import model_zoo


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TORCH_TPU_MODELS") == "all":
        return
    keep, drop = [], []
    for item in items:
        arch = getattr(getattr(item, "callspec", None), "params", {}).get("arch")
        (drop if isinstance(arch, model_zoo.Arch) and not arch.quick else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TORCH_TPU_MODEL_COVERAGE")
    if path and model_zoo.RESULTS:
        import coverage_table

        coverage_table.write(path, model_zoo.RESULTS)
