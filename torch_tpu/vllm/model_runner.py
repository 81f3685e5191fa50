"""vLLM's model runner on device tpu: GPUModelRunner, with CUDA's stream and event API routed to torch.tpu,
and every step padded to fixed-shape buckets (torch_tpu.vllm.buckets).

The runner keeps vLLM's pinned host buffers and their non_blocking copies to the device (torch_tpu
supports both), its scheduling bookkeeping and sampler; the attention backend is torch_tpu.vllm.attention.

Fixed shapes. Strict mode compiles one program per op signature, so every device op of a step must see
bucketed sizes, or each new batch size compiles new programs mid-serving. GPUModelRunner pads the token
count only for CUDA graphs, and prepares its inputs with device ops on [:num_tokens] / [:num_reqs]
slices. On the plain text-decoder path this runner instead:
- prepares positions, slot mapping and logits indices on the host (numpy), padded to the token bucket
  (positions 0, input id 0, slot -1: vLLM's null block 0) and the request bucket (the last real token's
  index), and uploads each buffer whole, once (no merge program on the device);
- hands attention the request-indexed tensors (query starts, sequence lengths, block table) at their full
  fixed size max_num_seqs; rows past the batch have sequence length 0;
- runs logits and the sampler on the padded request rows, with the sampling parameters (temperature,
  top-k, top-p, min-p, penalties) read at the request bucket too and the penalties' token tensors at a
  bucketed width, and drops the padded rows' tokens on the host;
- under async scheduling (vLLM's default: the host schedules and prepares step N+1 while the device runs
  step N), takes each carried-over request's last input token from the previous step's sampled tokens on
  the device: every step gathers its input ids from [previous step's sampled rows (max_num_seqs, a fixed
  buffer) ; the host's ids (token bucket)] through an index the host uploads, so the gather has the same
  shape and place in every step of a bucket, whether or not a request carries over.
warm_up() runs dummy steps over the buckets (buckets.warm_up_plan) through this same path, so that
serving compiles nothing new. The forward of a bucketed step is a step graph (step_graph.py): one program
per (token bucket, widths), replayed without running the model's Python once two captures agree. Other
paths (speculative decoding, LoRA, M-RoPE, multimodal or embedding
inputs, pipeline / data / context parallel, pooling, TORCH_TPU_VLLM_BUCKETS=0) run GPUModelRunner's
own preparation, correct but compiling per batch size.
"""
import os
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch_tpu
from vllm.config import CUDAGraphMode
from vllm.forward_context import BatchDescriptor, get_forward_context
from vllm.logger import init_logger
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput
from vllm.v1.sample.logits_processor.builtin import (LogitBiasLogitsProcessor, MinPLogitsProcessor,
                                                     MinTokensLogitsProcessor)
from vllm.v1.worker.block_table import SlotMappingMode
from vllm.v1.worker.gpu_model_runner import AsyncGPUModelRunnerOutput, GPUModelRunner

from . import buckets, step_graph
from .attention import TpuAttentionMetadata

logger = init_logger(__name__)

PAD_SLOT = -1  # vLLM's PAD_SLOT_ID: attention writes these tokens to the null block 0


def _event(*args, blocking=None, **kwargs):
    # torch.tpu.Event takes no `blocking`: its synchronize() always waits on the host.
    return torch.tpu.Event(*args, **kwargs)


def route_cuda_streams_to_tpu() -> None:
    """GPUModelRunner names torch.cuda.Stream / Event / current_stream / stream directly.

    A CPU build of torch has no CUDA, so these names are free in a serving process: they are pointed at
    torch.tpu's equivalents for the process (vLLM's XPU runner does the same for torch.xpu).
    """
    torch.cuda.Stream = torch.tpu.Stream
    torch.cuda.Event = _event
    torch.cuda.current_stream = torch.tpu.current_stream
    torch.cuda.default_stream = torch.tpu.default_stream
    torch.cuda.stream = torch.tpu.stream
    torch.cuda.set_stream = torch.tpu.set_stream


@dataclass(frozen=True)
class PaddedStep:
    tokens: int  # scheduled tokens
    padded_tokens: int
    reqs: int  # requests in the batch
    padded_reqs: int


def _rows_independent(md) -> bool:
    """Whether the sampler can run on padded logits rows as vLLM made its state: greedy, without penalties
    (their tensors are sized to the real batch) and paddable."""
    return md.all_greedy and md.no_penalties and _paddable(md)


def _paddable(md) -> bool:
    """Whether the sampler's per-request state can be padded to the request bucket (_padded_metadata):
    temperature, top-k, top-p, seeds, the three penalties and vLLM's built-in logits processors (min-p,
    logit bias, min tokens). Logprobs, allowed-token masks, bad words and other logits processors run on
    the real rows only."""
    holder = md.thinking_budget_state_holder
    return (md.allowed_token_ids_mask is None and md.max_num_logprobs is None
            and not md.logprob_token_ids and not md.bad_words_token_ids
            and (holder is None or not holder.has_tracked_requests())
            and all(type(p) in _BUILTIN_PROCESSORS for p in md.logitsprocs.all))


_BUILTIN_PROCESSORS = (MinPLogitsProcessor, LogitBiasLogitsProcessor, MinTokensLogitsProcessor)


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        route_cuda_streams_to_tpu()
        super().__init__(vllm_config, device)
        self.use_cuda_graph = False
        self._bucketed: bool | None = None  # decided at the first step (the model is loaded by then)
        self._step: PaddedStep | None = None  # the step in flight, when it is bucketed
        self._sampled_padded: torch.Tensor | None = None
        self._neutral_batch = None  # the input batch whose padded sampling rows _neutral_rows has set
        self._padded_prompt = None  # (vLLM's prompt token tensor, request bucket, its padded copy)
        # The forward of a bucketed step as one program per bucket, replayed (step_graph.py); tensor
        # parallelism's collectives cut a step's program, so it runs each mode's eager path there.
        self._step_graphs = (step_graph.StepGraphs(self) if step_graph.enabled()
                             and self.parallel_config.tensor_parallel_size == 1 else None)
        self._positions_host = self._make_buffer(self.max_num_tokens, dtype=torch.int64)
        self._logits_indices = self._make_buffer(self.max_num_reqs, dtype=torch.int64)
        self._is_padding_host = self._make_buffer(self.max_num_tokens, dtype=torch.bool)
        if self.use_async_scheduling:
            # The last step's sampled token per request row, and where each input id comes from: row i of
            # it (i < max_num_reqs) or the host's id at position i - max_num_reqs.
            self._prev_sampled = torch.zeros(self.max_num_reqs, dtype=self.input_ids.gpu.dtype, device=device)
            self._input_source = self._make_buffer(self.max_num_tokens, dtype=torch.int64)

    def _sync_device(self) -> None:
        torch.tpu.synchronize(self.device)

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        padded, self._sampled_padded = self._sampled_padded, None
        if padded is not None:
            # The whole padded output comes back (no slicing program on the device); padding is cut here.
            return padded.tolist()[: sampled_token_ids.shape[0]]
        return sampled_token_ids.tolist()

    # --- which steps are bucketed -------------------------------------------------------------------

    def _uses_buckets(self) -> bool:
        if self._bucketed is None:
            from vllm.distributed.parallel_state import get_pp_group

            pc = self.parallel_config
            reasons = {
                "TORCH_TPU_VLLM_BUCKETS=0": os.environ.get("TORCH_TPU_VLLM_BUCKETS", "1") == "0",
                "speculative decoding": self.speculative_config is not None,
                "LoRA": self.lora_config is not None,
                "M-RoPE": self.uses_mrope,
                "multimodal inputs": self.supports_mm_inputs,
                "prompt embeddings": self.enable_prompt_embeds,
                "pooling": self.is_pooling_model,
                "encoder-decoder": self.model_config.is_encoder_decoder,
                "context parallel": self.dcp_world_size > 1,
                "pipeline parallel": get_pp_group().world_size > 1,
                "data parallel": pc.data_parallel_size > 1 or pc.use_ubatching,
                "kv_sharing_fast_prefill": self.cache_config.kv_sharing_fast_prefill,
                "hybrid (recurrent) layers": self.model_config.is_hybrid,
            }
            off = [name for name, on in reasons.items() if on]
            self._bucketed = not off
            if off:
                logger.warning("tpu: steps are not padded to fixed-shape buckets (%s): Strict mode compiles "
                               "programs per batch size while serving", ", ".join(off))
        return self._bucketed

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        self._step = None  # set by _prepare_inputs when this step is bucketed
        self._sampled_padded = None
        return super().execute_model(scheduler_output, intermediate_tensors)

    def _dummy_run(self, *args, **kwargs):
        self._step = None  # profiling runs take GPUModelRunner's own path
        return super()._dummy_run(*args, **kwargs)

    # --- input preparation on the host, padded -----------------------------------------------------

    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens: np.ndarray):
        if not self._uses_buckets():
            return super()._prepare_inputs(scheduler_output, num_scheduled_tokens)
        n = scheduler_output.total_num_scheduled_tokens
        r = self.input_batch.num_reqs
        assert n > 0 and r > 0
        step = PaddedStep(n, buckets.padded(n, self.scheduler_config.max_num_batched_tokens, buckets.MIN_TOKENS),
                          r, buckets.padded(r, self.max_num_reqs, buckets.MIN_REQS))
        big_n, big_r = step.padded_tokens, step.padded_reqs
        batch = self.input_batch

        # The whole block table (fixed size): attention reads its rows through the request of each token.
        batch.block_table.commit_block_table(self.max_num_reqs)

        req_indices = np.repeat(self.arange_np[:r], num_scheduled_tokens)
        cu_num_tokens = self._get_cumsum_and_arange(num_scheduled_tokens, self.query_pos.np)
        positions = batch.num_computed_tokens_cpu[req_indices] + self.query_pos.np[:n]

        token_indices = positions + req_indices * batch.token_ids_cpu.shape[1]
        torch.index_select(batch.token_ids_cpu_tensor.flatten(), 0, torch.from_numpy(token_indices),
                           out=self.input_ids.cpu[:n])
        self.input_ids.np[n:big_n] = 0
        self._upload_whole(self.input_ids)
        self._compute_prev_positions(r)
        if self.use_async_scheduling:
            self._upload_input_source(r, big_n, cu_num_tokens)

        pos = self._positions_host.np
        pos[:n] = positions
        pos[n:big_n] = 0
        self.positions.copy_(self._positions_host.cpu, non_blocking=True)

        # Query starts past the batch stay at its end (non-decreasing), as vLLM pads them.
        self.query_start_loc.np[0] = 0
        self.query_start_loc.np[1 : r + 1] = cu_num_tokens
        self.query_start_loc.np[r + 1 :].fill(cu_num_tokens[-1])
        self.query_start_loc.copy_to_gpu()

        torch.add(batch.num_computed_tokens_cpu_tensor[:r], torch.from_numpy(num_scheduled_tokens),
                  out=self.optimistic_seq_lens_cpu[:r])
        self.optimistic_seq_lens_cpu[r:].fill_(0)
        self.seq_lens.copy_(self.optimistic_seq_lens_cpu, non_blocking=True)

        num_tokens = np.array([self.requests[q].num_tokens for q in batch.req_ids], dtype=np.int32)
        # Partial prefills sample nothing: their tokens are cleared on the host (_bookkeeping_sync).
        self.discard_request_mask.np[:r] = self.optimistic_seq_lens_cpu[:r].numpy() < num_tokens
        self.discard_request_mask.np[r:] = False

        for table in batch.block_table.block_tables:
            if table.slot_mapping_mode == SlotMappingMode.NONE:  # recurrent-state groups: no slots
                continue
            bs = table.block_size
            blocks = table.block_table.np[req_indices, positions // bs].astype(np.int64)
            table.slot_mapping.np[:n] = blocks * bs + positions % bs
            table.slot_mapping.np[n:big_n] = PAD_SLOT
            self._upload_whole(table.slot_mapping)

        # Padded request rows sample from the batch's last token; their tokens are dropped.
        li = self._logits_indices.np
        li[:r] = cu_num_tokens - 1
        li[r:big_r] = n - 1
        logits_indices = self._upload_whole(self._logits_indices)[:big_r]
        self._step = step
        return logits_indices, None, 1

    @staticmethod
    def _upload_whole(buffer) -> torch.Tensor:
        """Uploads a host buffer whole: its bucket's first rows alone would be a partial write, one more
        program per step (a merge on the device); the device ops read only the bucket's rows, so the rows
        past them may hold anything. Safe under async scheduling as vLLM's own copies are: the upload is work
        of the current stream, which prepare_inputs_event waits for before the host rewrites the buffer."""
        return buffer.gpu.copy_(buffer.cpu, non_blocking=True)

    def _upload_input_source(self, r: int, big_n: int, cu_num_tokens: np.ndarray) -> None:
        """Under async scheduling a request of the previous step has -1 (a placeholder) on the host for its
        last input token, the token that step sampled: _preprocess takes it from that step's row on the
        device (self.prev_positions, vLLM's row mapping; -1 for a request new to the batch)."""
        source = self._input_source.np
        source[:big_n] = np.arange(self.max_num_reqs, self.max_num_reqs + big_n)
        prev = self.prev_positions.np[:r]
        carried = prev >= 0
        source[cu_num_tokens[carried] - 1] = prev[carried]
        self._upload_whole(self._input_source)

    def _determine_batch_execution_and_padding(self, num_tokens, num_reqs, *args, **kwargs):
        if self._step is None:
            return super()._determine_batch_execution_and_padding(num_tokens, num_reqs, *args, **kwargs)
        desc = BatchDescriptor(num_tokens=self._step.padded_tokens, num_reqs=self._step.padded_reqs)
        return CUDAGraphMode.NONE, desc, False, None, None

    def _get_slot_mappings(self, num_tokens_padded, num_reqs_padded, num_tokens_unpadded, ubatch_slices=None):
        if self._step is not None:
            num_tokens_unpadded = num_tokens_padded  # the padding is -1 already (host side)
        return super()._get_slot_mappings(num_tokens_padded, num_reqs_padded, num_tokens_unpadded, ubatch_slices)

    def _build_attention_metadata(self, num_tokens, num_reqs, max_query_len, num_tokens_padded=None,
                                  num_reqs_padded=None, **kwargs):
        if self._step is not None:
            # Tokens at their bucket, request-indexed tensors at their full size.
            num_tokens = num_tokens_padded = self._step.padded_tokens
            num_reqs = num_reqs_padded = self.max_num_reqs
        return super()._build_attention_metadata(num_tokens, num_reqs, max_query_len, num_tokens_padded,
                                                 num_reqs_padded, **kwargs)

    def _prepare_padding_mask(self, num_tokens_unpadded, num_tokens_padded):
        if self._step is None:
            return super()._prepare_padding_mask(num_tokens_unpadded, num_tokens_padded)
        mask = self._is_padding_host.np
        mask[:num_tokens_unpadded] = False
        mask[num_tokens_unpadded:num_tokens_padded] = True
        self.is_padding.copy_(self._is_padding_host.cpu, non_blocking=True)  # whole: see _upload_whole
        return self.is_padding[:num_tokens_padded]

    def _preprocess(self, scheduler_output, num_input_tokens, intermediate_tensors=None):
        if self._step is None:
            return super()._preprocess(scheduler_output, num_input_tokens, intermediate_tensors)
        # Text-only first-rank path of GPUModelRunner._preprocess, without its device zeroing of the padded
        # positions (a program per padding size): the host wrote them as 0.
        # Under async scheduling _model_forward gathers the carried-over ids into these (inside the step graph).
        input_ids = self.input_ids.gpu[:num_input_tokens]
        return (input_ids, None, self.positions[:num_input_tokens], None, self._init_model_kwargs(), None)

    def _model_forward(self, input_ids=None, positions=None, intermediate_tensors=None, inputs_embeds=None,
                       **model_kwargs):
        step = self._step
        if step is None:
            return super()._model_forward(input_ids, positions, intermediate_tensors, inputs_embeds, **model_kwargs)
        context = get_forward_context()
        metadata = context.attn_metadata
        metadata = list(metadata.values()) if isinstance(metadata, dict) else []

        def forward():
            ids = input_ids
            if self.use_async_scheduling:
                # One gather at the token bucket's shape, also when no request carries over (the step's
                # program is the bucket's).
                ids = torch.cat((self._prev_sampled, ids))[self._input_source.gpu[: ids.shape[0]]]
            try:
                return super(TpuModelRunner, self)._model_forward(ids, positions, intermediate_tensors,
                                                                  inputs_embeds, **model_kwargs)
            finally:
                for m in metadata:  # computed inside the forward; not results of its program
                    if isinstance(m, TpuAttentionMetadata):
                        m.release()

        if self._step_graphs is None:
            return forward()
        widths = {m.block_table_full.shape[1] for m in metadata if isinstance(m, TpuAttentionMetadata)}
        return self._step_graphs.run((step.padded_tokens, tuple(sorted(widths))), forward)

    def _sample(self, logits, spec_decode_metadata):
        """Samples the padded request rows (their tokens are dropped in _bookkeeping_sync and sample_tokens)
        with the sampling state padded to the request bucket, so the sampler's programs are the bucket's;
        where that state cannot be padded (_paddable), the real rows only (the sampler then compiles per
        batch size)."""
        step = self._step
        if step is None or logits is None:
            return super()._sample(logits, spec_decode_metadata)
        batch = self.input_batch
        md = batch.sampling_metadata
        if _rows_independent(md):
            out = super()._sample(logits, spec_decode_metadata)
        elif not _paddable(md):
            out = super()._sample(logits[: step.reqs], spec_decode_metadata)
        else:
            min_p = [(p, p.min_p) for p in md.logitsprocs.argmax_invariant if isinstance(p, MinPLogitsProcessor)]
            batch.update_async_output_token_ids()  # the penalties' output tokens are copied below
            batch.sampling_metadata = self._padded_metadata(md, step)
            try:
                out = super()._sample(logits, spec_decode_metadata)
            finally:
                batch.sampling_metadata = md
                for p, real in min_p:
                    p.min_p = real
        if self.use_async_scheduling:
            sampled = out.sampled_token_ids
            self._prev_sampled[: sampled.shape[0]].copy_(sampled.view(-1))
        return out

    def _padded_metadata(self, md, step: PaddedStep):
        """md with its per-request tensors sliced at the request bucket instead of the batch. The rows past
        the batch hold the parameters of requests that left them, or the neutral ones they start with
        (_neutral_rows): valid values, and their tokens are dropped. Seeded requests keep their own
        generators (rows < step.reqs), so padding does not change what they draw."""
        batch, big_r = self.input_batch, step.padded_reqs
        if self._neutral_batch is not batch:
            self._neutral_rows(batch)
        fields = {name: getattr(batch, name)[:big_r] for name in ("temperature", "top_k", "top_p")
                  if getattr(md, name) is not None}
        if not md.no_penalties:
            fields.update({name: getattr(batch, name)[:big_r]
                           for name in ("frequency_penalties", "presence_penalties", "repetition_penalties")})
            fields["prompt_token_ids"] = self._padded_prompt_ids(md, big_r)
            fields["output_token_ids"] = self._padded_output_ids(md.output_token_ids, big_r, batch.vocab_size)
        for p in md.logitsprocs.argmax_invariant:
            if isinstance(p, MinPLogitsProcessor) and p.min_p_count:
                # Restored by _sample; update_state re-slices it at the batch's size when the batch changes.
                p.min_p = p.min_p_device[:big_r].unsqueeze(1)
        return replace(md, **fields)

    def _penalty_width(self, width: int) -> int:
        """The bucket of a penalty token tensor's width (the longest prompt, or output, of the batch)."""
        return buckets.padded(max(width, 1), self.max_model_len, buckets.MIN_TOKENS)

    def _padded_prompt_ids(self, md, big_r: int) -> torch.Tensor:
        """vLLM's prompt token tensor [r, longest prompt] (padded with the vocabulary size, a token no prompt
        has) as [big_r, its width's bucket]: one upload, redone only when vLLM remakes it (a new batch)."""
        cached = self._padded_prompt
        if cached is not None and cached[0] is md.prompt_token_ids and cached[1] == big_r:
            return cached[2]
        batch = self.input_batch
        prompts = batch._make_prompt_token_ids_cpu_tensor()  # what vLLM uploaded: [r, longest prompt]
        r, width = prompts.shape
        ids = torch.full((big_r, self._penalty_width(width)), batch.vocab_size, dtype=torch.int64)
        ids[:r, :width] = prompts
        padded = ids.to(self.device)
        self._padded_prompt = (md.prompt_token_ids, big_r, padded)
        return padded

    def _padded_output_ids(self, outputs: list[list[int]], big_r: int, pad: int) -> list[list[int]]:
        """The batch's output tokens as big_r rows of the longest one's width bucket, padded with `pad` (the
        vocabulary size, which the penalties' counts leave out), so their tensor has a bucketed shape."""
        width = self._penalty_width(max(map(len, outputs), default=0))
        rows = [row + [pad] * (width - len(row)) for row in outputs]
        return rows + [[pad] * width for _ in range(big_r - len(rows))]

    def _neutral_rows(self, batch) -> None:
        """Temperature 1, top-k the vocabulary, top-p 1, no penalties and min-p 0 in the rows past the batch,
        on the host and on the device (vLLM copies only the batch's rows; a device row never written would
        read 0, a top-k of 0). Once per input batch (vLLM may replace it when the KV cache is set up); a copy
        of a whole buffer is an upload, no program."""
        r = batch.num_reqs
        buffers = [(batch.temperature_cpu_tensor, batch.temperature, 1.0), (batch.top_k_cpu_tensor, batch.top_k,
                   batch.vocab_size), (batch.top_p_cpu_tensor, batch.top_p, 1.0),
                   (batch.frequency_penalties_cpu_tensor, batch.frequency_penalties, 0.0),
                   (batch.presence_penalties_cpu_tensor, batch.presence_penalties, 0.0),
                   (batch.repetition_penalties_cpu_tensor, batch.repetition_penalties, 1.0)]
        buffers += [(p.min_p_cpu_tensor, p.min_p_device, 0.0) for p in batch.logitsprocs.argmax_invariant
                    if isinstance(p, MinPLogitsProcessor) and p.use_double_tensor]
        for cpu, device, neutral in buffers:
            cpu[r:] = neutral
            device.copy_(cpu)
        self._neutral_batch = batch

    def _bookkeeping_sync(self, scheduler_output, sampler_output, *args, **kwargs):
        step, sampled = self._step, sampler_output.sampled_token_ids
        if step is not None and sampled.shape[0] > step.reqs:
            # The whole padded output comes back (_to_list; no slicing program on the device).
            self._sampled_padded = sampled
            sampler_output = replace(sampler_output, sampled_token_ids=sampled[: step.reqs])
        return super()._bookkeeping_sync(scheduler_output, sampler_output, *args, **kwargs)

    def sample_tokens(self, grammar_output):
        out = super().sample_tokens(grammar_output)
        step = self._step
        if step is not None and isinstance(out, AsyncGPUModelRunnerOutput):
            # Its download is the padded rows, at their bucket's shape; the output lists the real ones.
            out.sampled_token_ids_cpu = out.sampled_token_ids_cpu[: step.reqs]
        return out

    # --- warm-up ------------------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Runs one dummy step per entry of buckets.warm_up_plan through execute_model / sample_tokens, so
        every program a bucketed serving step uses is compiled (or loaded from the persistent cache) now.

        The dummy requests are greedy (then, per request bucket, one step that samples), their blocks all
        the null block 0 (which attention never reads for a real request), and they are finished after
        their step. TORCH_TPU_VLLM_WARM_UP=0 skips it
        (programs then compile at first use, as without buckets)."""
        if (os.environ.get("TORCH_TPU_VLLM_WARM_UP", "1") == "0" or not self._uses_buckets()
                or not self.kv_cache_config.kv_cache_groups):
            return
        block_size = self.cache_config.block_size
        table_width = self.input_batch.block_table[0].max_num_blocks_per_req
        # Fused mode traces a step into one graph, keyed by its three buckets together: warm every triple.
        plan = buckets.warm_up_plan(self.scheduler_config.max_num_batched_tokens, self.max_num_reqs, block_size,
                                    self.max_model_len, table_width,
                                    whole_steps=torch_tpu.get_eager_mode() == "fused")
        # Fused graphs also depend on how their storages are held: the first step still finds vLLM's
        # zeroed KV cache as its int8 buffer (pending work would join that graph too), every later one
        # as the attention dtype's buffer the first step left. So the first step runs twice.
        self._neutral_rows(self.input_batch)  # before any step copies into those buffers
        self._sync_device()
        plan = plan[:1] + plan
        # The sampler's programs depend on the request bucket only: one decode step per bucket, its requests
        # mixing greedy with seeded and unseeded random sampling through every paddable filter (_paddable).
        req_buckets = sorted({buckets.padded(r, self.max_num_reqs, buckets.MIN_REQS) for _, r, _ in plan})
        sampled = [min(b, self.scheduler_config.max_num_batched_tokens) for b in req_buckets]
        logger.info("tpu: warming up %d bucketed steps", len(plan) + len(sampled))
        greedy = SamplingParams(temperature=0.0, max_tokens=1)
        for k, (n, r, seq_len) in enumerate(plan):
            self._warm_up_step(f"{k}", n, seq_len, [greedy] * r)
        for big_r in sampled:
            # One request short of the bucket: vLLM's copies of the batch's rows are the partial ones of serving.
            r = max(big_r - 1, 1)
            params = [SamplingParams(temperature=0.7, top_k=2, top_p=0.9, min_p=0.01, max_tokens=1,
                                     repetition_penalty=1.1, presence_penalty=0.1, frequency_penalty=0.1,
                                     seed=i if i % 4 == 1 else None) if i % 2 or r == 1 else greedy
                      for i in range(r)]
            self._warm_up_step(f"sampled_{r}", r, 1, params)
            self._warm_up_penalties(big_r)
        self._sync_device()

    def _warm_up_penalties(self, big_r: int) -> None:
        """vLLM's penalties at every width bucket of their token tensors (the longest prompt and output of
        a batch grow past what dummy steps reach), on dummy logits of the request bucket."""
        from vllm.v1.sample.ops.penalties import apply_all_penalties

        batch, vocab = self.input_batch, self.input_batch.vocab_size
        for width in buckets.sizes(self.max_model_len, buckets.MIN_TOKENS):
            logits = torch.zeros(big_r, vocab, device=self.device)
            prompt = torch.full((big_r, width), vocab, dtype=torch.int64).to(self.device)
            apply_all_penalties(logits, prompt, batch.presence_penalties[:big_r],
                                batch.frequency_penalties[:big_r], batch.repetition_penalties[:big_r],
                                [[vocab] * width] * big_r)

    def _warm_up_step(self, name: str, n: int, seq_len: int, params: list[SamplingParams]) -> None:
        """One dummy step of n tokens over len(params) new requests of seq_len tokens each (their last
        tokens scheduled), their blocks all the null block 0; the requests are finished after it."""
        r = len(params)
        ids = [f"_tpu_warm_up_{name}_{i}" for i in range(r)]
        share = [n // r + (1 if i < n % r else 0) for i in range(r)]
        group_block_sizes = [g.kv_cache_spec.block_size for g in self.kv_cache_config.kv_cache_groups]
        out = SchedulerOutput.make_empty()
        for rid, q, p in zip(ids, share, params):
            out.scheduled_new_reqs.append(NewRequestData(
                req_id=rid, prompt_token_ids=[0] * seq_len, mm_features=[], sampling_params=p,
                pooling_params=None, block_ids=tuple([0] * buckets.cdiv(seq_len, bs) for bs in group_block_sizes),
                num_computed_tokens=seq_len - q, lora_request=None))
            out.num_scheduled_tokens[rid] = q
        out.total_num_scheduled_tokens = n
        self.execute_model(out)
        self.sample_tokens(None)
        done = SchedulerOutput.make_empty()
        done.finished_req_ids = set(ids)
        self.execute_model(done)
