"""A process that loads many programs stays under Linux's cap on memory mappings (vm.max_map_count):
XLA:CPU maps each loaded program's code separately, and past the cap the plugin crashes. The program
caches shed their least recently used half when the process nears the cap (csrc/runtime/MappingBudget.h);
here the cap is lowered (TORCH_TPU_MAX_MAP_COUNT) to a little above what the process already uses."""
import torch

from conftest import assert_close


def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_program_caches_shed_near_the_mapping_cap(mode, monkeypatch):
    # Lengths of this mode's own: Debug runs Strict's programs, so the same shapes would load nothing new there.
    start = {"strict": 0, "fused": 1000, "debug": 2000}[mode]
    x = torch.arange(start + 400, dtype=torch.float32)
    (x.to("tpu") + 1).cpu()  # the plugin is loaded
    base = mappings()
    cap = (base + 400) * 4 // 3  # the caches shed above 3/4 of the cap: ~400 mappings from now
    monkeypatch.setenv("TORCH_TPU_MAX_MAP_COUNT", str(cap))
    sheds = torch.tpu.executor_stats()["mapping_sheds"]
    for n in range(start + 1, start + 400):
        # A program of its own for each n (its shape), read back at once.
        y = x[:n].to("tpu") * 3 - n
        assert_close(y.sum(), (x[:n] * 3 - n).sum())
        if torch.tpu.executor_stats()["mapping_sheds"] > sheds and n > start + 60:
            break
    assert torch.tpu.executor_stats()["mapping_sheds"] > sheds
    assert mappings() < cap
    monkeypatch.delenv("TORCH_TPU_MAX_MAP_COUNT")
    # Programs dropped from memory come back (disk tier or compile) with the same results.
    assert_close((x.to("tpu") * 3 - 5).sum(), (x * 3 - 5).sum())
