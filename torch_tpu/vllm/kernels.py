"""Torch code for the Triton kernels vLLM's model runner launches (there is no Triton for tpu).

Each function takes the kernel's own argument names, so vLLM's dispatcher forwards its launch arguments
by name or by position alike.
"""
import torch


def token_requests(query_start_loc: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """The request of each of the batch's first num_tokens tokens, on the device: the number of requests
    whose query ends at or before the token (query_start_loc is [num_reqs + 1], starting at 0). A token
    past the last request's end gets num_reqs."""
    token = torch.arange(num_tokens, device=query_start_loc.device, dtype=query_start_loc.dtype)
    return torch.searchsorted(query_start_loc[1:].contiguous(), token, right=True)


def compute_slot_mapping_kernel(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,  # [num_reqs + 1] int32
    positions_ptr,  # [num_tokens] int64
    block_table_ptr,  # [max_num_reqs, block_table_stride] int32
    block_table_stride,
    slot_mapping_ptr,  # [max_num_tokens] int64, written
    KV_CACHE_BLOCK_SIZE,
    TOTAL_CP_WORLD_SIZE,
    TOTAL_CP_RANK,
    CP_KV_CACHE_INTERLEAVE_SIZE,
    PAD_ID,
    BLOCK_SIZE=None,
):
    """slot = block_table[request of token, position // block size] * block size + position % block size.

    Every token past num_tokens gets PAD_ID. All of it runs on the device (token_requests), so no value is
    read back to the host.
    """
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("tpu: context parallelism (decode_context_parallel_size > 1) is not supported")
    if num_tokens > 0:
        request = token_requests(query_start_loc_ptr, num_tokens)
        positions = positions_ptr[:num_tokens]
        table = block_table_ptr.reshape(-1, block_table_stride)
        block = table[request, positions // KV_CACHE_BLOCK_SIZE].to(torch.int64)
        slot_mapping_ptr[:num_tokens] = block * KV_CACHE_BLOCK_SIZE + positions % KV_CACHE_BLOCK_SIZE
    if max_num_tokens > num_tokens:
        slot_mapping_ptr[num_tokens:max_num_tokens].fill_(PAD_ID)


OVERRIDES = {
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping_kernel,
}
