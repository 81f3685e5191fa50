"""Paged attention for vLLM written with ordinary torch ops, so it runs on tpu tensors (and on CPU).

The KV cache of a layer is vLLM's page view [num_blocks, num_kv_heads, block_size, 2 * head_size], stored
head-major (layout LHBNC: [num_kv_heads, num_blocks, ...] in memory; LBHNC works too). Each (block, head)
page holds the block_size keys of its positions, then their values (`_CachePages`), so a read gathers whole
[block_size, head_size] runs of keys and of values, already [tokens, positions, head] per head: attention
batches over (head, token) with no transpose or copy of the gathered pages. A write is one index_put_ of
each token's key and value rows into the layer's whole allocation. Every token of a batch,
prefill or decode alike, attends to the cache pages of its own request: its request is found on the device from
query_start_loc, its pages gathered through the block table, and a mask keeps the positions it may see
(causal, below its request's length, inside the sliding window). The block table is cut to a
power-of-two number of blocks covering the batch's longest sequence (buckets.width). Block 0 is vLLM's
null block, never handed to a request: padded tokens (slot -1) write there.

TpuModelRunner passes the tokens padded to their bucket and the request-indexed tensors (query starts,
sequence lengths, block table) at their full size max_num_seqs, so every op here has a shape fixed by
(token bucket, width). Padded tokens fall on a request row past the batch (sequence length 0) or on the
last request; their outputs are never read.
"""
from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.kv_cache_interface import KVCacheLayout

from . import buckets
from .kernels import token_requests
from .platform import MODEL_DTYPES


class TpuAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = list(MODEL_DTYPES)
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]

    @staticmethod
    def get_name() -> str:
        return "TORCH_TPU_PAGED"

    @staticmethod
    def get_impl_cls():
        return TpuAttentionImpl

    @staticmethod
    def get_builder_cls():
        return TpuAttentionMetadataBuilder

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []  # any

    @classmethod
    def supported_kv_cache_layouts(cls):
        return (KVCacheLayout.LHBNC, KVCacheLayout.LBHNC)  # head-major first (see the module docstring)

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_non_causal(cls) -> bool:
        return False

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER


@dataclass
class TpuAttentionMetadata:
    """What attention reads of a step, as views of the runner's persistent device buffers; the tensors
    derived from them are computed by the first layer that asks (and shared by the others), inside the
    model's forward, so that a captured step graph (step_graph.py) reads only persistent storages."""
    num_actual_tokens: int
    num_tokens: int  # the token bucket
    num_reqs: int
    query_start_loc: torch.Tensor  # [num_reqs + 1] int32
    seq_lens: torch.Tensor  # [num_reqs] int32
    block_table_full: torch.Tensor  # [num_reqs, num_blocks]: num_blocks a bucket covering max_seq_len
    slot_mapping: torch.Tensor  # [num_tokens] int64, -1 for padding

    def __post_init__(self):
        self._derived = None

    def derived(self):
        """(token_request, token_position, block_table): per token its request and its position in that
        request's sequence, and the block table as int64."""
        if self._derived is None:
            # Tokens past the last request's end fall on the last row (never read).
            request = token_requests(self.query_start_loc, self.num_tokens).clamp_(max=self.num_reqs - 1)
            seq_lens = self.seq_lens.to(torch.int64)
            query_end = self.query_start_loc[1:].to(torch.int64)
            token = torch.arange(self.num_tokens, device=self.query_start_loc.device)
            position = seq_lens[request] - (query_end[request] - token)
            self._derived = (request, position, self.block_table_full.to(torch.int64))
        return self._derived

    def release(self):
        """Drops the derived tensors (a step graph's capture must not keep them as results)."""
        self._derived = None


class TpuAttentionMetadataBuilder(AttentionMetadataBuilder[TpuAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> TpuAttentionMetadata:
        m = common_attn_metadata
        num_reqs = m.num_reqs
        blocks = buckets.width(m.max_seq_len, self.block_size, m.block_table_tensor.shape[1])
        return TpuAttentionMetadata(
            num_actual_tokens=m.num_actual_tokens,
            num_tokens=m.slot_mapping.shape[0],
            num_reqs=num_reqs,
            query_start_loc=m.query_start_loc[: num_reqs + 1],
            seq_lens=m.seq_lens[:num_reqs],
            block_table_full=m.block_table_tensor[:num_reqs, :blocks],
            slot_mapping=m.slot_mapping,
        )


class TpuAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None, sliding_window=None,
                 kv_cache_dtype="auto", logits_soft_cap=None, attn_type=AttentionType.DECODER,
                 kv_sharing_target_layer_name=None, sinks=None, **kwargs):
        if alibi_slopes is not None:
            raise NotImplementedError("tpu attention: ALiBi slopes are not supported by TORCH_TPU_PAGED")
        if sinks is not None:
            raise NotImplementedError("tpu attention: attention sinks are not supported by TORCH_TPU_PAGED")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"tpu attention: attention type {attn_type} is not supported; "
                                      "TORCH_TPU_PAGED runs decoder self-attention")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap or 0.0
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping):
        if self.kv_sharing_target_layer_name is not None:
            return
        pages = _CachePages(_typed_cache(kv_cache, self.kv_cache_dtype))
        slots = slot_mapping[: key.shape[0]].to(torch.int64).clamp(min=0)  # -1 (padding) -> the null block
        entries = torch.stack([key, value])  # [2, tokens, kv_heads, head]
        if pages.rows.dtype != entries.dtype:
            entries = _quantize(entries, pages.rows.dtype, layer)
        pages.write(slots, entries)

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None,
                output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("tpu attention: fused output quantization is not supported")
        if attn_metadata is None:  # profiling run
            return output
        m: TpuAttentionMetadata = attn_metadata
        token_request, token_position, block_table = m.derived()
        num_tokens = token_request.shape[0]
        group = self.num_heads // self.num_kv_heads
        head = self.head_size
        q = query[:num_tokens].view(num_tokens, self.num_kv_heads, group, head).transpose(0, 1)  # [kvh, t, g, d]

        # Each token's pages, keys and values gathered a page at a time: [kvh, t, positions, d] each.
        pages = _CachePages(_typed_cache(kv_cache, self.kv_cache_dtype))
        table = block_table[token_request]  # [t, blocks]
        positions = table.shape[1] * pages.block_size
        keys, values = pages.gather(table, self.num_kv_heads)
        if keys.dtype != q.dtype:
            keys = _dequantize(keys, q.dtype, layer, "_k_scale")
            values = _dequantize(values, q.dtype, layer, "_v_scale")

        scores = torch.matmul(q.float(), keys.float().transpose(-1, -2)) * self.scale  # [kvh, t, g, positions]
        if self.logits_soft_cap:
            scores = torch.tanh(scores / self.logits_soft_cap) * self.logits_soft_cap
        key_position = torch.arange(positions, device=q.device)
        visible = key_position[None, :] <= token_position[:, None]
        if self.sliding_window is not None:
            visible = visible & (key_position[None, :] > token_position[:, None] - self.sliding_window)
        # Out of place: masked_fill's clone and in-place fill (a donated small buffer) cost XLA:CPU about
        # twice this select (docs/serving.md).
        scores = torch.where(visible[None, :, None, :], scores, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, values.float()).to(output.dtype)  # [kvh, t, g, head]
        output[:num_tokens].copy_(out.transpose(0, 1).reshape(output[:num_tokens].shape))
        return output


# vLLM allocates an fp8 cache as bytes (uint8); its entries are float8 of the named format ("fp8" is e4m3).
_FP8_CACHE = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


class _CachePages:
    """A layer's KV cache as pages: vLLM's view [blocks, kv_heads, block_size, 2 * head] gives each (block,
    head) block_size * 2 * head consecutive entries (LHBNC, LBHNC), and this backend keeps there the
    block_size keys of its positions, then their values. Both halves are [block_size, head] runs, so a
    read gathers whole runs of keys and of values ([kv_heads, tokens, positions, head] each, no copy of a
    half out of interleaved entries: on XLA:CPU those two copies cost about as much as the dots), and
    the runs per index are long (XLA:CPU's gather runs per index).

    Addressed through the whole storage (every layer vLLM put in the same allocation), not the layer's
    slice of it: a write into a slice is a copy of the layer out of the allocation, the scatter and a
    copy back; a write into the whole storage is one scatter, in place in the donated buffer."""

    def __init__(self, cache):
        _, _, self.block_size, width = cache.shape
        page = self.block_size * width
        strides = cache.stride()
        if (strides[3] != 1 or strides[2] != width or strides[0] % page or strides[1] % page
                or cache.storage_offset() % page):
            raise NotImplementedError(f"tpu attention: a KV cache with strides {strides} (shape {tuple(cache.shape)}) "
                                      "does not hold each block's positions of a head together; use the LHBNC "
                                      "or LBHNC layout")
        self.head = width // 2
        total = cache.untyped_storage().nbytes() // cache.element_size()
        self.rows = cache.as_strided((total // self.head, self.head), (self.head, 1), 0)  # [n, head]
        self.first = cache.storage_offset() // page
        self.block_pages, self.head_pages = strides[0] // page, strides[1] // page

    def index(self, block, head):
        """The page of (block, head) in the storage, counted in pages."""
        return self.first + block * self.block_pages + head * self.head_pages

    def write(self, slots, entries):
        """Keys and values entries [2, tokens, kv_heads, head] at the slots [tokens] (block * block_size +
        position): one index_put_ of their rows."""
        block, position = slots // self.block_size, slots % self.block_size
        heads = torch.arange(entries.shape[2], device=slots.device)
        page = self.index(block[:, None], heads)  # [tokens, kv_heads]
        half = torch.arange(2, device=slots.device)[:, None, None] * self.block_size
        rows = page * (2 * self.block_size) + position[:, None] + half  # [2, tokens, kv_heads]
        self.rows[rows.reshape(-1)] = entries.reshape(-1, entries.shape[-1])

    def gather(self, table, num_kv_heads):
        """Keys and values of the blocks table [t, blocks] of every head: [kv_heads, t, blocks * block_size,
        head] each."""
        t, blocks = table.shape
        halves = self.rows.view(-1, self.block_size * self.head)  # [2 * pages, block_size * head]
        heads = torch.arange(num_kv_heads, device=table.device)[:, None, None]
        page = self.index(table[None], heads) * 2  # [kvh, t, blocks]
        shape = (num_kv_heads, t, blocks * self.block_size, self.head)
        return halves[page].view(shape), halves[page + 1].view(shape)


def _typed_cache(kv_cache, kv_cache_dtype):
    fp8 = _FP8_CACHE.get(kv_cache_dtype)
    return kv_cache.view(fp8) if fp8 is not None and kv_cache.dtype == torch.uint8 else kv_cache


def _scale(layer, name):
    s = getattr(layer, name, None)
    return 1.0 if s is None else s


def _quantize(entries, dtype, layer):
    """Keys and values [2, ...] into a cache of a narrower float dtype: divided by the layer's k/v scales,
    saturated to the cache dtype's range."""
    k = entries[0].float() / _scale(layer, "_k_scale")
    v = entries[1].float() / _scale(layer, "_v_scale")
    limit = torch.finfo(dtype).max
    return torch.stack([k, v]).clamp(-limit, limit).to(dtype)


def _dequantize(entries, dtype, layer, scale_name):
    return (entries.float() * _scale(layer, scale_name)).to(dtype)
