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


# Speculative decoding. vLLM's rejection sampler (vllm.v1.sample.rejection_sampler) launches one Triton
# program per request that walks the request's draft tokens up to the first rejection. Here each kernel does
# that walk for all requests at once on a [requests, max_spec_len] grid: a position is written when no earlier
# position of its request was rejected, the bonus token after the drafts when none was. All of it stays on
# the device.

def _draft_grid(cu_num_draft_tokens, width, num_tokens):
    """(token index [R, width], valid [R, width]) of each request's draft positions, from the inclusive
    cumulative draft counts [R]; invalid positions index token 0 (their values are never written)."""
    cu = cu_num_draft_tokens.to(torch.int64)
    start = torch.cat([cu.new_zeros(1), cu[:-1]])
    index = start[:, None] + torch.arange(width, device=cu.device)
    valid = index < cu[:, None]
    return index.masked_fill(~valid, 0).clamp(max=max(num_tokens - 1, 0)), valid


def _accept_walk(output, cu_num_draft_tokens, width, tokens, accepted, valid, bonus, rows):
    """Writes each request's row of output [R, width + 1]: tokens up to and including its first rejected
    position, then bonus[r] if it rejected none; only rows where `rows` (None: every row)."""
    rejected = valid & ~accepted
    earlier = (rejected.cumsum(1) - rejected.long()) > 0  # a rejection before this position
    write = valid & ~earlier
    all_accepted = ~rejected.any(1)
    if rows is not None:
        write &= rows[:, None]
        all_accepted &= rows
    head = output[:, :width]
    head.copy_(torch.where(write, tokens.to(output.dtype), head))
    cu = cu_num_draft_tokens.to(torch.int64)
    after = (cu - torch.cat([cu.new_zeros(1), cu[:-1]]))[:, None]  # the column after the last draft
    kept = output.gather(1, after)
    output.scatter_(1, after, torch.where(all_accepted[:, None], bonus.reshape(-1, 1).to(output.dtype), kept))


def _bonus_only(output, bonus, rows):
    """No request of the step has a draft token: each (selected) row is its bonus token."""
    bonus = bonus.reshape(-1).to(output.dtype)
    first = output[:, 0]
    first.copy_(bonus if rows is None else torch.where(rows, bonus, first))


def rejection_greedy_sample_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
                                   target_argmax_ptr, bonus_token_ids_ptr, is_greedy_ptr, max_spec_len,
                                   uniform_probs_ptr, synthetic_conditional_rates_ptr, SYNTHETIC_MODE=False):
    """Greedy requests (is_greedy None: all): a draft is accepted when it is the target's argmax (synthetic
    mode: when its uniform draw is below the position's acceptance rate); a rejected position gets the argmax."""
    num_tokens = draft_token_ids_ptr.shape[0]
    if num_tokens == 0:
        _bonus_only(output_token_ids_ptr, bonus_token_ids_ptr, is_greedy_ptr)
        return
    index, valid = _draft_grid(cu_num_draft_tokens_ptr, max_spec_len, num_tokens)
    draft = draft_token_ids_ptr[index]
    target = target_argmax_ptr[index].to(draft.dtype)
    if SYNTHETIC_MODE:
        rate = synthetic_conditional_rates_ptr[:max_spec_len]
        accepted = (uniform_probs_ptr[index] < rate[None, :]) & (draft >= 0)
    else:
        accepted = draft == target
    tokens = torch.where(accepted, draft, target)
    _accept_walk(output_token_ids_ptr, cu_num_draft_tokens_ptr, max_spec_len, tokens, accepted, valid,
                 bonus_token_ids_ptr, is_greedy_ptr)


def rejection_random_sample_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
                                   draft_probs_ptr, target_probs_ptr, bonus_token_ids_ptr, recovered_token_ids_ptr,
                                   uniform_probs_ptr, is_greedy_ptr, max_spec_len, vocab_size,
                                   synthetic_conditional_rates_ptr, NO_DRAFT_PROBS=False, SYNTHETIC_MODE=False):
    """Sampled requests (not is_greedy): a draft is accepted when target_prob / draft_prob >= its uniform
    draw (draft_prob 1 without draft probabilities; synthetic mode: the draw below the position's rate),
    never when it is padding (-1); a rejected position gets its recovered token."""
    num_tokens = draft_token_ids_ptr.shape[0]
    if num_tokens == 0:
        _bonus_only(output_token_ids_ptr, bonus_token_ids_ptr, ~is_greedy_ptr)
        return
    index, valid = _draft_grid(cu_num_draft_tokens_ptr, max_spec_len, num_tokens)
    draft = draft_token_ids_ptr[index]
    uniform = uniform_probs_ptr[index]
    if SYNTHETIC_MODE:
        accepted = uniform < synthetic_conditional_rates_ptr[:max_spec_len][None, :]
    else:
        token = draft.clamp(min=0).long()
        target_prob = target_probs_ptr[index, token]
        if draft_probs_ptr is None:
            draft_prob = torch.ones_like(target_prob)
        else:
            draft_prob = draft_probs_ptr[index, token]
        # A zero draft probability rejects (its inf / nan ratio is masked), as the kernel does.
        accepted = (draft_prob > 0) & (target_prob / draft_prob >= uniform)
    accepted &= draft >= 0
    tokens = torch.where(accepted, draft, recovered_token_ids_ptr[index].to(draft.dtype))
    _accept_walk(output_token_ids_ptr, cu_num_draft_tokens_ptr, max_spec_len, tokens, accepted, valid,
                 bonus_token_ids_ptr, ~is_greedy_ptr)


def expand_kernel(output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS):
    """output[t] = input[request of t] (replace_from replaced by replace_to) for the first MAX_NUM_TOKENS
    tokens of each request; tokens past the last request are left as they are."""
    num_tokens, num_reqs = output_ptr.shape[0], input_ptr.shape[0]
    if num_tokens == 0 or num_reqs == 0:
        return
    cu = cu_num_tokens_ptr.contiguous()
    token = torch.arange(num_tokens, device=cu.device, dtype=cu.dtype)
    request = torch.searchsorted(cu, token, right=True)
    row = request.clamp(max=num_reqs - 1)
    start = torch.where(row > 0, cu[(row - 1).clamp(min=0)], torch.zeros_like(cu[row]))
    write = (request < num_reqs) & (token - start < MAX_NUM_TOKENS)
    value = input_ptr[row]
    value = value.masked_fill(value == replace_from, replace_to)
    output_ptr.copy_(torch.where(write, value, output_ptr))


def sample_recovered_tokens_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
                                   draft_probs_ptr, target_probs_ptr, inv_q_ptr, vocab_size, BLOCK_SIZE=None,
                                   NO_DRAFT_PROBS=False, USE_FP64_GUMBEL=False):
    """The token a rejected draft position falls back to: argmax over the vocabulary of
    max(target_prob - draft_prob, 0) (without draft probabilities: target_prob, zero at the draft token)
    times the request's 1/q (exponential draws), i.e. a Gumbel-max sample of the residual distribution."""
    num_tokens = output_token_ids_ptr.shape[0]
    if num_tokens == 0:
        return
    cu = cu_num_draft_tokens_ptr.contiguous()
    token = torch.arange(num_tokens, device=cu.device, dtype=cu.dtype)
    request = torch.searchsorted(cu, token, right=True).clamp(max=cu.shape[0] - 1)
    target = target_probs_ptr[:num_tokens]
    if draft_probs_ptr is None:
        vocab = torch.arange(target.shape[1], device=target.device)
        prob = target.masked_fill(vocab[None, :] == draft_token_ids_ptr[:num_tokens, None].long(), 0.0)
    else:
        prob = (target - draft_probs_ptr[:num_tokens]).clamp(min=0.0)
    score = prob.to(inv_q_ptr.dtype) * inv_q_ptr[request]
    output_token_ids_ptr.copy_(score.argmax(-1).clamp(max=vocab_size - 1).to(output_token_ids_ptr.dtype))


OVERRIDES = {
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping_kernel,
    "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel": rejection_greedy_sample_kernel,
    "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel": rejection_random_sample_kernel,
    "vllm.v1.sample.rejection_sampler.expand_kernel": expand_kernel,
    "vllm.v1.sample.rejection_sampler.sample_recovered_tokens_kernel": sample_recovered_tokens_kernel,
}
