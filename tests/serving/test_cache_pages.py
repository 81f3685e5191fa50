"""attention._CachePages: the KV-cache write (do_kv_cache_update) and the gather of a table of blocks agree, on
vLLM's layouts (LHBNC, LBHNC) of a layer that shares its allocation with another layer, on tpu in every eager
mode and on CPU; the write stays inside its own layer's memory; a layout whose positions of a head are not
together is refused."""
import pytest
import torch
from conftest import mode, to_tpu  # noqa: F401

pytest.importorskip("vllm")
from torch_tpu.vllm.attention import TpuAttentionImpl, _CachePages  # noqa: E402

BLOCKS, HEADS, BLOCK, HEAD = 6, 2, 4, 3
# The memory order of (block, head, position) of each layout, outermost first.
LAYOUTS = {"LHBNC": (1, 0, 2), "LBHNC": (0, 1, 2)}


def _layer_caches(order, device):
    """Two layers in one zeroed allocation, each as vLLM's view [blocks, heads, block_size, 2 * head]."""
    sizes = (BLOCKS, HEADS, BLOCK)
    memory = torch.zeros(2, *[sizes[d] for d in order], 2 * HEAD, device=device)
    inverse = [order.index(d) for d in range(3)]
    return [memory[i].permute(*inverse, 3) for i in range(2)], memory


SLOTS = [5, 1, 9, 23, 17, -1]  # -1: a padded token, written to the null block 0


def _entries():
    g = torch.Generator().manual_seed(0)
    return torch.randn(len(SLOTS), HEADS, HEAD, generator=g), torch.randn(len(SLOTS), HEADS, HEAD, generator=g)


def _write_and_read(order, device):
    slots = torch.tensor(SLOTS)
    key, value = _entries()
    (first, second), memory = _layer_caches(order, device)
    impl = TpuAttentionImpl(num_heads=HEADS, head_size=HEAD, scale=1.0, num_kv_heads=HEADS)
    slot_mapping, key, value = (t.to(device) for t in (slots, key, value))
    impl.do_kv_cache_update(None, key, value, second, slot_mapping)
    table = torch.arange(BLOCKS, device=device)[None].repeat(2, 1)  # two tokens reading every block
    keys, values = _CachePages(second).gather(table, HEADS)
    return keys.cpu(), values.cpu(), first.cpu(), memory.cpu()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_written_entries_are_gathered_back(layout):
    keys, values, first, _ = _write_and_read(LAYOUTS[layout], "cpu")
    key, value = _entries()
    expected_k = torch.zeros(HEADS, BLOCKS * BLOCK, HEAD)
    expected_v = torch.zeros(HEADS, BLOCKS * BLOCK, HEAD)
    for i, s in enumerate(SLOTS):
        expected_k[:, max(s, 0)] = key[i]
        expected_v[:, max(s, 0)] = value[i]
    for token in range(2):
        assert torch.equal(keys[:, token], expected_k)
        assert torch.equal(values[:, token], expected_v)
    assert not first.any(), "a write reached the other layer's memory"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_tpu_equals_cpu(layout, mode):  # noqa: F811
    cpu = _write_and_read(LAYOUTS[layout], "cpu")
    tpu = _write_and_read(LAYOUTS[layout], "tpu")
    for a, b in zip(tpu, cpu):
        assert torch.equal(a, b)


@pytest.mark.parametrize("order", [(0, 2, 1), (2, 0, 1), (1, 2, 0)])
def test_positions_apart_are_refused(order):
    (_, second), _ = _layer_caches(order, "cpu")
    with pytest.raises(NotImplementedError, match="LHBNC or LBHNC"):
        _CachePages(second)
