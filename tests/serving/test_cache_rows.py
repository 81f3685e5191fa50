"""attention._cache_rows: the row view of a layer's KV cache addresses the same entries as the 4-D page view,
for every dense layout of (blocks, kv heads, positions), not only vLLM's LHBNC / LBHNC."""
import itertools

import pytest
import torch

pytest.importorskip("vllm")
from torch_tpu.vllm.attention import _cache_rows  # noqa: E402


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_rows_address_the_page_entries(order):
    blocks, heads, block_size, width = 5, 3, 4, 6
    sizes = (blocks, heads, block_size)
    memory = torch.arange(blocks * heads * block_size * width, dtype=torch.float32)
    # order: the memory order of (block, head, position), outermost first
    cache = memory.view(*[sizes[d] for d in order], width).permute(*[order.index(d) for d in range(3)], 3)
    rows, (block_rows, head_rows, position_rows) = _cache_rows(cache)
    for b, h, p in itertools.product(range(blocks), range(heads), range(block_size)):
        assert torch.equal(rows[b * block_rows + h * head_rows + p * position_rows], cache[b, h, p])


def test_non_dense_layout_is_refused():
    cache = torch.zeros(4, 2, 8, 12)[:, :, ::2]  # every other position: not dense
    with pytest.raises(NotImplementedError, match="LHBNC or LBHNC"):
        _cache_rows(cache)
