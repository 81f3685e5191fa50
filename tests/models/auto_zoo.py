"""The architecture table generated from transformers' own auto mappings (issue 29, item 1).

For every model type of `transformers.CONFIG_MAPPING`: its config class's defaults shrunk generically to tiny
sizes (`tiny_config`), the base model class (MODEL_MAPPING_NAMES) and one main head (`HEADS`, the first auto
mapping that lists the type), and synthetic inputs made from the model class's `main_input_name`
(`make_inputs`). tools/model_sweep.py runs each type on tpu against CPU; model_zoo.py (the hand-written table)
stays where it tests more (generate, MoE experts paths, hand-made inputs).

The shrink rules work on the config's `to_dict()`, key by key, recursively into nested sub-configs
(text_config, vision_config, audio_config, backbone_config, encoder/decoder...):
  hidden sizes -> 32, layers -> 2, heads -> 4 (kv heads 2), head_dim -> 8, intermediate -> 37 (40 with experts:
  CPU's grouped_mm wants 16-byte strides), vocab -> 99 (token ids above it -> small ids), image_size -> 32,
  patch -> 8, experts -> 4, top-k -> 2, per-layer lists (layer_types, ...) truncated to the new layer count,
  per-stage lists (depths, hidden_sizes, num_heads lists) shrunk element-wise so heads still divide sizes,
  state-space scans to a 16-wide state in chunks of 4 (shorter than the inputs: the scan crosses a chunk), a
  layer pattern that is itself the layer count (NemotronH's layers_block_type) to one layer of each kind.
`OVERRIDES` (auto_overrides.py) holds the few types where a generic rule cannot work (mostly config validators
that tie two shrunk sizes together), `ATTN_IMPLEMENTATION` the types whose eager attention is broken in transformers
itself (run with SDPA), `LABELS_ARE_INPUT_IDS` decoder-only speech LMs listed among the seq2seq heads.

Inputs: the main input by name (input_ids, pixel_values, input_values, input_features, inputs_embeds,
pixel_values_videos), then every *required* forward argument synthesized by name and from the config
(auto_inputs.py: Qwen-style grid_thw patches, NaFlex spatial shapes, audio masks, time series, any argument
whose documented shape has only known dimensions, ...; `auto_inputs.CLASS_INPUTS` for the few classes no name rule
can feed). Classes transformers does not export (vision/audio towers of multimodal models) come from the type's
modeling module (`model_class`), and a class whose config_class is a sub-config gets that sub-config (`config_for`).
"""
import dataclasses
import functools
import inspect
import math
import re

import torch

import transformers
from transformers.models.auto import configuration_auto, modeling_auto

import auto_inputs
from auto_inputs import (  # the tiny sizes: inputs and the configs that match them
    BATCH, EXPERTS, FFN, FFN_MOE, HEADS_N, HIDDEN, IMAGE, KV_HEADS, LAYERS, PATCH, QUERIES, SEQ, SSM_CHUNK,
    SSM_STATE, TOPK, VOCAB)
from auto_overrides import ATTN_IMPLEMENTATION, OVERRIDES, SPEECH_CONV


# The main head: the first of these auto mappings that lists the model type.
HEADS = [
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("token-classification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("semantic-segmentation", "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES"),
    ("depth-estimation", "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
    ("time-series-prediction", "MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES"),
]
# Heads whose forward takes `labels`, and what the labels are.
LABELS = {"causal-lm": "ids", "masked-lm": "masked", "seq2seq-lm": "ids5", "speech-seq2seq": "ids5",
          "image-classification": "class", "audio-classification": "class", "ctc": "ctc",
          "sequence-classification": "class", "token-classification": "tokclass"}

# Heads whose labels are their own tokens (a causal LM loss): decoder-only speech LMs listed among the seq2seq heads,
# ShieldGemma 2 among the image classifiers (its labels go to the Gemma 3 LM inside).
LABELS_ARE_INPUT_IDS = {"FunAsrNanoForConditionalGeneration", "Nemotron3_5TranscribeForConditionalGeneration",
                        "VibeVoiceForConditionalGeneration", "ShieldGemma2ForImageClassification"}

# Config keys, by what they size.
_HIDDEN_KEYS = {"hidden_size", "d_model", "n_embd", "embed_dim", "hidden_dim", "embedding_size", "d_embed",
                "projection_dim", "dim", "word_embed_proj_dim", "n_embed", "model_dim", "emb_dim",
                "embedding_dim", "encoder_hidden_size", "decoder_hidden_size", "text_hidden_size",
                "vision_hidden_size", "audio_hidden_size", "projection_size", "proj_dim", "d_inner_hidden",
                "kv_lora_rank", "q_lora_rank", "hidden_dim_size", "output_hidden_size", "adapter_hidden_size",
                "fusion_hidden_size", "neck_hidden_size", "backbone_hidden_size", "mm_hidden_size",
                "projector_hidden_size", "text_embed_dim", "vision_embed_dim", "reassemble_hidden_size",
                "attention_hidden_size", "visual_feat_dim", "hidden_size_per_layer_input", "out_hidden_size",
                "hidden_size_global"}
_LAYER_KEYS = {"num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
               "num_decoder_layers", "num_encoder_layers", "depth", "decoder_num_hidden_layers",
               "num_text_layers", "num_vision_layers", "text_layers", "vision_layers", "num_blocks",
               "encoder_num_hidden_layers", "num_adapter_layers", "cross_attention_layers",
               "l_layers", "x_layers", "r_layers"}
_HEAD_KEYS = {"num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", "decoder_attention_heads",
              "n_heads", "decoder_num_attention_heads", "encoder_num_attention_heads", "num_query_heads",
              "attention_heads", "linear_num_heads", "index_n_heads"}
_KV_KEYS = {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num",
            "encoder_num_key_value_heads", "decoder_num_key_value_heads"}
_FFN_KEYS = {"intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner", "mlp_dim",
             "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_intermediate_size",
             "encoder_intermediate_size", "intermediate_dim", "ff_dim", "feed_forward_size", "dim_feedforward",
             "encoder_ffn_size", "d_inner", "expert_intermediate_size", "ffn_hidden_size", "mlp_hidden_size",
             "projection_intermediate_size"}
_EXPERT_KEYS = {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts",
                "n_experts"}
_TOPK_KEYS = {"num_experts_per_tok", "top_k", "moe_k", "moe_topk", "moe_top_k", "num_selected_experts",
              "num_experts_per_token"}
_HEAD_DIM_KEYS = {"head_dim", "d_kv", "d_head", "attention_head_dim", "kv_channels", "qk_nope_head_dim",
                  "qk_rope_head_dim", "v_head_dim", "qk_head_dim", "head_size", "attention_head_size",
                  "linear_head_dim", "index_head_dim"}
_POS_KEYS = {"max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length",
             "n_ctx", "max_seq_length"}
_PER_LAYER_LIST_KEYS = {"layer_types", "mlp_layer_types", "attention_types", "block_types", "layers_block_type",
                        "hybrid_override_pattern", "mlp_only_layers", "full_attn_idxs", "layer_norm_types",
                        "attn_layer_indices", "expert_layer_period_types", "sliding_window_layers",
                        "no_rope_layers", "moe_layers", "layers_type"}
_STAGE_HIDDEN_LIST_KEYS = {"hidden_sizes", "embed_dims", "dims", "embed_dim_list", "channels", "widths",
                           "num_channels_list", "stage_channels", "encoder_hidden_sizes", "decoder_hidden_sizes",
                           "out_channels_list", "hidden_dims", "embed_dim_per_stage"}
_STAGE_HEADS_LIST_KEYS = {"num_heads", "num_attention_heads", "heads", "encoder_num_heads", "attention_heads",
                          "num_attention_heads_per_stage"}
_STAGE_DEPTH_LIST_KEYS = {"depths", "num_layers", "blocks", "stage_depths", "layers", "encoder_layers",
                          "blocks_per_stage"}
_TOKEN_ID_SUFFIXES = ("_token_id", "_token_index", "_id")
# State-space scans (Mamba-2, NemotronH, Bamba...): a small state, and chunks shorter than the inputs so the scan
# crosses a chunk boundary (the defaults' 128-256 wide state and chunks make a tiny model's scan the slowest part).
_SSM_STATE_KEYS = {"ssm_state_size", "state_size", "mamba_d_state", "d_state"}



def _shrink_list(key, v, old_layers, new_layers):
    if not v or not all(isinstance(x, (int, float, str, bool, list, type(None))) for x in v):
        return v
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    if key in _STAGE_HIDDEN_LIST_KEYS and ints:
        return [min(x, 16 * 2 ** i) for i, x in enumerate(v)]
    if key in _STAGE_HEADS_LIST_KEYS and ints:
        return [min(x, 2 ** min(i, 2)) for i, x in enumerate(v)]
    if key in _STAGE_DEPTH_LIST_KEYS and ints:
        return [min(x, 1) for x in v]
    if key == "block_configs" and all(isinstance(x, list) and x and isinstance(x[0], list) for x in v):
        # PP-LCNet's blocks, listed per stage (its depths do not count them): a stage's first block, which makes
        # the stage's output width.
        return [stage[:1] for stage in v]
    if (key in _FFN_KEYS or key.endswith("_intermediate_size")) and ints:  # per layer (Gemma 3n) or per modality
        per_layer = old_layers and len(v) == old_layers
        return [min(x, FFN_MOE if "moe" in key else FFN) for x in (v[:new_layers] if per_layer else v)]
    if old_layers and len(v) == old_layers and new_layers < old_layers:
        kept = list(v[:new_layers])
        if all(isinstance(x, str) for x in v):
            # Every kind of layer the pattern has stays represented (a hybrid keeps its full-attention layer).
            missing = [x for x in dict.fromkeys(v) if x not in kept]
            while missing and len(set(kept)) < new_layers:
                dup = next(i for i in range(len(kept) - 1, -1, -1) if kept.count(kept[i]) > 1)
                kept[dup] = missing.pop(0)
        return kept
    if key in _PER_LAYER_LIST_KEYS and old_layers is None and len(v) > LAYERS and all(isinstance(x, str) for x in v):
        # A layer pattern that is the layer count itself (NemotronH's layers_block_type): one layer of each kind.
        return list(dict.fromkeys(v))
    if key in _PER_LAYER_LIST_KEYS and old_layers is not None and new_layers is not None and ints:
        return [x for x in v if x < new_layers] if key != "layer_types" else v
    return v


def shrink(d):
    """A shrunk copy of a config's to_dict() (nested dicts shrunk recursively)."""
    d = dict(d)
    old_layers = next((d[k] for k in ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
                       if isinstance(d.get(k), int)), None)
    if isinstance(d.get("depths"), list) and d.get("num_layers") == len(d["depths"]) \
            and not isinstance(d.get("num_hidden_layers"), int):
        old_layers = None  # Swin's num_layers counts stages: per-stage lists (pretrained_window_sizes) keep theirs
    has_experts = any(isinstance(d.get(k), int) and d[k] > 1 for k in _EXPERT_KEYS)
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and old_layers and all(str(x).isdigit() for x in v):
            # Per-layer settings keyed by layer index (per_layer_config): only the layers that remain.
            out[k] = {x: y for x, y in v.items() if int(x) < min(old_layers, LAYERS)}
            continue
        if isinstance(v, dict) and k not in ("id2label", "label2id", "rope_scaling", "rope_parameters",
                                              "quantization_config", "task_specific_params"):
            out[k] = shrink(v) if ("model_type" in v or "hidden_size" in v or k.endswith("config")) else v
            continue
        if v is None and k in _TOPK_KEYS and has_experts:  # an MoE config that leaves top-k unset
            out[k] = TOPK
            continue
        if v is None and k in _KV_KEYS and isinstance(d.get("num_attention_heads"), int):
            out[k] = min(d["num_attention_heads"], HEADS_N)  # unset key/value heads: multi-head attention
            continue
        if isinstance(v, bool) or not isinstance(v, (int, list, tuple)):
            out[k] = v
            continue
        if isinstance(v, (list, tuple)):
            out[k] = _shrink_list(k, list(v), old_layers, min(old_layers, LAYERS) if old_layers else None)
            continue
        if k in _HIDDEN_KEYS or k.endswith("_hidden_size"):  # X-CLIP's mit_hidden_size
            out[k] = min(v, HIDDEN)
        elif k in _LAYER_KEYS:
            out[k] = min(v, LAYERS)
        elif k in _HEAD_KEYS:
            out[k] = min(v, HEADS_N)
        elif k in _KV_KEYS:
            # Multi-head attention stays so (MLA's key/value heads are the query heads); GQA gets 2.
            heads = d.get(k.replace("key_value", "attention").replace("kv_heads", "heads"), d.get("num_attention_heads"))
            out[k] = min(v, HEADS_N) if v == heads else min(v, KV_HEADS)
        elif k in _FFN_KEYS or k.endswith("_intermediate_size"):
            out[k] = min(v, FFN_MOE if has_experts else FFN)
        elif k in _EXPERT_KEYS:
            out[k] = min(v, EXPERTS)
        elif k in _TOPK_KEYS:
            out[k] = min(v, TOPK)
        elif k in _HEAD_DIM_KEYS:
            out[k] = min(v, HIDDEN // HEADS_N)
        elif k == "vocab_size" or k.startswith("vocab_size_"):  # vocab_size_per_layer_input (Gemma 3n/4)
            out[k] = min(v, VOCAB)
        elif k == "image_size":
            out[k] = min(v, IMAGE)
        elif k == "patch_size":
            out[k] = min(v, PATCH)
        elif k in _POS_KEYS:
            out[k] = min(v, 512)
        elif k == "num_queries":  # object queries: no more than a 32 x 32 image's detector proposals
            out[k] = min(v, QUERIES)
        elif k == "num_frames":  # video models: a few frames, a whole number of (2-frame) tubelets
            out[k] = min(v, 4)
        elif k in ("n_group", "topk_group", "num_expert_group"):
            out[k] = 1
        elif k in ("rotary_dim", "partial_rotary_dim"):
            out[k] = min(v, 4)
        elif k in _SSM_STATE_KEYS:
            out[k] = min(v, SSM_STATE)
        elif k == "mamba_chunk_size" or k == "chunk_size" and any(x in d for x in _SSM_STATE_KEYS):
            out[k] = min(v, SSM_CHUNK)
        elif k in ("time_step_rank", "mamba_dt_rank"):
            out[k] = min(v, 4)
        elif k == "head_out_channels":  # a text recogniser's character classes (PP-OCR: 18714)
            out[k] = min(v, VOCAB)
        elif k == "conv_symmetric_num":  # PP-LCNet's re-parameterisable branches per convolution
            out[k] = 1
        elif k == "num_groups":  # GroupNorm groups over the shrunk channels
            out[k] = min(v, 4)
        elif k.endswith(_TOKEN_ID_SUFFIXES) and v >= VOCAB:
            out[k] = VOCAB - 1 - (sum(map(ord, k)) % 8)  # distinct ids near the top of the tiny vocab
        else:
            out[k] = v
    _tie_widths(d, out)
    # Backbone stage selections name the old stages: let the config derive them from the new depth. A layer-based
    # backbone (ViT-like: no per-stage depths) that feeds several layers to a neck (DPT, Depth Anything: one neck
    # size per index) keeps as many: the last ones, with at least that many layers.
    kept = None
    for key in ("out_indices", "backbone_out_indices"):
        idx = out.get(key)
        if isinstance(idx, list) and len(idx) > 1 and all(isinstance(i, int) for i in idx) and "depths" not in out \
                and isinstance(out.get("num_hidden_layers"), int) and old_layers:
            n, layers = len(idx), max(out["num_hidden_layers"], len(idx))
            out.update({"num_hidden_layers": layers, key: list(range(layers - n + 1, layers + 1))})
            out["out_features"] = None if "out_features" in out else out.get("out_features")
            kept = key
    # A stage-based backbone keeps its stages (depths shrink per stage, not in number): its selection stays, as the
    # necks of detectors (RT-DETR's encoder_in_channels) are one input per selected stage.
    stages_kept = isinstance(d.get("depths"), list) and len(out.get("depths") or ()) == len(d["depths"])
    for k in ("out_features", "out_indices"):
        if out.get(k) is not None and isinstance(out[k], list) and k != kept and not stages_kept:
            out[k] = None
    # Vision-language configs that leave the image/video placeholder token unset (BLIP-2's image_token_index):
    # an id in the tiny vocabulary, which their forward compares input_ids with.
    if isinstance(out.get("vision_config"), dict):
        for k in ("image_token_index", "image_token_id", "video_token_index", "video_token_id"):
            if k in out and out[k] is None:
                out[k] = VOCAB - 1 - (sum(map(ord, k)) % 8)
    # Periodic layer kinds (Jamba: attention every 8th layer from layer 4): a period the new depth still reaches.
    layers = out.get("num_hidden_layers")
    if isinstance(layers, int) and layers and old_layers and layers < old_layers:
        for k in [k for k in out if k.endswith("_layer_period")]:
            offset = k[: -len("period")] + "offset"
            if isinstance(out[k], int) and out[k] > layers:
                out[k] = layers
                if isinstance(out.get(offset), int):
                    out[offset] = out[offset] % layers
    if isinstance(d.get("depths"), list) and d.get("num_layers") == len(d["depths"]):
        out["num_layers"] = len(out["depths"])
    # Encoder-decoders whose decoder start token is unset (labels are shifted right from it), or not a field of
    # the config at all (T5's is in its generation config in transformers 5, but _shift_right reads the config).
    if out.get("is_encoder_decoder") and out.get("decoder_start_token_id") is None:
        out["decoder_start_token_id"] = 2
        if "pad_token_id" in out and out["pad_token_id"] is None:  # labels' -100 become the pad token
            out["pad_token_id"] = 0
    # Probabilistic forecasters (lags_sequence) leave the horizon unset and refuse to build without one.
    if "lags_sequence" in out and out.get("prediction_length") is None:
        out["prediction_length"] = 4
    # Layer counts that list per-layer patterns (layer_types) must match the new count.
    for k in ("layer_types",):
        if isinstance(out.get(k), list) and old_layers and isinstance(out.get("num_hidden_layers"), int):
            out[k] = out[k][:out["num_hidden_layers"]]
    return out


def _tie_widths(d, out):
    """Sizes derived from the widths shrink() changed, made consistent with the new ones (in place)."""
    # head_dim must agree with the new hidden size where the config derives one from the other.
    # A head_dim of None means "hidden / heads" to most configs, but some models read it as is (HunYuan: None ** -0.5
    # even at the default size): written out.
    if "head_dim" in out and out["head_dim"] is None and isinstance(out.get("hidden_size"), int) \
            and isinstance(out.get("num_attention_heads"), int) and out["num_attention_heads"]:
        out["head_dim"] = max(1, out["hidden_size"] // out["num_attention_heads"])
    if "head_dim" in out and isinstance(out["head_dim"], int) and isinstance(out.get("hidden_size"), int):
        heads = out.get("num_attention_heads")
        if isinstance(heads, int) and heads:
            out["head_dim"] = max(1, out["hidden_size"] // heads) if out["head_dim"] else out["head_dim"]
    # Depthwise group counts tied to the hidden size (Mimi's upsample_groups = hidden_size): the new size.
    for k in [k for k in out if k.endswith("_groups") and isinstance(d.get(k), int) and not isinstance(d[k], bool)]:
        if isinstance(d.get("hidden_size"), int) and d[k] == d["hidden_size"] > 1:
            out[k] = out["hidden_size"]
    # Multi-head latent attention (DeepSeek-V2/V3): the rotary part of a head is its own size; a head size that
    # was the sum of the rotary and the plain parts (qk_head_dim; Mistral 4's head_dim) stays that sum.
    if isinstance(out.get("qk_rope_head_dim"), int) and "head_dim" in out:
        out["head_dim"] = out["qk_rope_head_dim"]
    if all(isinstance(d.get(k), int) for k in ("qk_rope_head_dim", "qk_nope_head_dim")):
        both = d["qk_rope_head_dim"] + d["qk_nope_head_dim"]
        for k in ("qk_head_dim", "head_dim"):
            if d.get(k) == both:
                out[k] = out["qk_rope_head_dim"] + out["qk_nope_head_dim"]
    # Sizes equal to the hidden size (or d_model) in the defaults (codebook_dim, pooler_output_size, lru_width,
    # adapter inputs, RT-DETR's encoder_hidden_dim and its per-level decoder_in_channels...) are tied to it: they
    # follow the new hidden size.
    width = next((k for k in ("hidden_size", "d_model") if isinstance(d.get(k), int) and not isinstance(d[k], bool)), None)
    if width and d[width] > HIDDEN and isinstance(out.get(width), int):
        for k, v in d.items():
            if not isinstance(v, bool) and out.get(k) == v \
                    and (v == d[width] or isinstance(v, list) and v and all(x == d[width] for x in v)) \
                    and k.endswith(("_dim", "_size", "_width", "_channels", "_channel")) \
                    and not k.startswith(("codebook_size", "sliding", "max_", "chunk")):
                out[k] = [out[width]] * len(v) if isinstance(v, list) else out[width]
    # EfficientNet-family widths (ALIGN's vision tower): every stage's channels scale by width_coefficient and the
    # top convolution is 1280 of them; a width making the last stage 32 channels, hidden_dim the top's. Blocks per
    # stage scale by depth_coefficient (B7's 3.1: 55 blocks): 0.5 leaves 10.
    if isinstance(out.get("width_coefficient"), float) and isinstance(out.get("depth_divisor"), int):
        out["width_coefficient"] = 0.1
        if isinstance(out.get("depth_coefficient"), float):
            out["depth_coefficient"] = min(out["depth_coefficient"], 0.5)
        if isinstance(out.get("hidden_dim"), int):
            div = out["depth_divisor"]
            out["hidden_dim"] = max(div, int(1280 * 0.1 + div / 2) // div * div)
    # Mamba-2 heads: n_heads x d_head = expand x hidden (or the explicit SSM size, made that again).
    if isinstance(out.get("mamba_n_heads"), int) and isinstance(out.get("hidden_size"), int):
        out["mamba_n_heads"] = min(out["mamba_n_heads"], HEADS_N)
        if isinstance(out.get("mamba_d_ssm"), int):
            out["mamba_d_ssm"] = out.get("mamba_expand", 2) * out["hidden_size"]
        if isinstance(out.get("mamba_d_head"), int):
            out["mamba_d_head"] = out.get("mamba_expand", 2) * out["hidden_size"] // out["mamba_n_heads"]
    # NemotronH's Mamba heads are their own count and size (not tied to the hidden size); groups divide heads.
    if isinstance(out.get("mamba_num_heads"), int) and isinstance(out.get("mamba_head_dim"), int):
        out["mamba_num_heads"] = min(out["mamba_num_heads"], HEADS_N)
        out["mamba_head_dim"] = min(out["mamba_head_dim"], 2 * HIDDEN // HEADS_N)
        if isinstance(out.get("n_groups"), int):
            out["n_groups"] = math.gcd(out["n_groups"], out["mamba_num_heads"])
    # Plain Mamba-2 configs (num_heads, head_dim, expand, state_size): the same identity, groups dividing heads.
    if all(isinstance(out.get(k), int) for k in ("num_heads", "head_dim", "expand", "state_size", "hidden_size")):
        out["head_dim"] = out["expand"] * out["hidden_size"] // out["num_heads"]
        if isinstance(out.get("n_groups"), int) and out["num_heads"] % out["n_groups"]:
            out["n_groups"] = 1
    # Multimodal rotary sections must sum to half the (new) head size.
    for holder in (out, out.get("rope_parameters"), out.get("rope_scaling")):
        if isinstance(holder, dict) and isinstance(holder.get("mrope_section"), list) and holder["mrope_section"]:
            hd = out.get("head_dim") if isinstance(out.get("head_dim"), int) else None
            if hd is None and isinstance(out.get("hidden_size"), int) and isinstance(out.get("num_attention_heads"), int):
                hd = out["hidden_size"] // out["num_attention_heads"]
            if hd:
                holder["mrope_section"] = _mrope_sections(holder["mrope_section"], hd // 2)
    # HGNet stages (RT-DETR-family and PP-OCR backbones): the channels each stage makes are the widths the backbone
    # reports (hidden_sizes, which the necks are sized from); each stage takes the previous one's, the first the
    # stem's (its first entry the image's channels); a block of two layers, one block a stage.
    if all(isinstance(out.get(k), list) for k in ("stem_channels", "stage_in_channels", "stage_mid_channels",
                                                   "stage_out_channels", "hidden_sizes")):
        widths = out["hidden_sizes"]
        stem = min(out["stem_channels"][-1], 16)
        out.update(stem_channels=[out["stem_channels"][0], stem, stem], stage_out_channels=list(widths),
                   stage_in_channels=[stem] + widths[:-1], stage_mid_channels=[max(4, w // 2) for w in widths],
                   stage_num_blocks=[1] * len(widths),
                   stage_numb_of_layers=[min(n, 2) for n in out.get("stage_numb_of_layers") or [2] * len(widths)])
    if "conv_dim" in out and "conv_stride" in out:
        out.update(SPEECH_CONV)
    # Hierarchical window attention (Swin: depths + window_size): 2-pixel patches and 2-token windows, so every
    # stage of the 32-pixel image (16, 8, 4, 2 tokens a side) holds whole windows.
    if isinstance(out.get("depths"), list) and isinstance(out.get("window_size"), int) and out["window_size"] > 2 \
            and isinstance(out.get("patch_size"), int) and out["patch_size"] > 2:
        # (Florence-2's per-stage patch lists and Swin2SR's 1-pixel patches work as they are)
        out.update(window_size=2, patch_size=2)


_DROP = ("transformers_version", "architectures", "_name_or_path", "_attn_implementation_autoset",
         "_commit_hash", "dtype", "torch_dtype")


def model_types():
    return sorted(configuration_auto.CONFIG_MAPPING_NAMES)


def _mrope_sections(like, half):
    """Multimodal rotary sections like the defaults' `like`, summing to `half` (half the new rotary size)."""
    n = len(like) or 3  # (HunYuan-VL's built-in default is empty: three axes)
    if n == 3 and like and like[0] == like[1] and half >= 3:  # height, width interleaved pairwise (ERNIE-VL)
        return [half // 3, half // 3, half - 2 * (half // 3)]
    return [half // n + (1 if i < half % n else 0) for i in range(n)]


@functools.lru_cache(maxsize=None)
def _default_mrope(cls):
    """The built-in mrope_section the config's modeling module falls back to, or None."""
    import importlib.util
    spec = importlib.util.find_spec(cls.__module__.replace(".configuration_", ".modeling_"))
    if spec is None or not spec.origin:
        return None
    with open(spec.origin) as f:
        m = re.search(r'"mrope_section", \[([\d, ]*)\]', f.read())
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else None


def _sub_dicts(d):
    """d and its nested sub-config dicts, at any depth (ColQwen2: vlm_config.text_config)."""
    yield d
    for v in d.values():
        if isinstance(v, dict):
            yield from _sub_dicts(v)


def _default_mrope_sections(cls, d):
    """Models whose rotary embedding falls back to a built-in mrope_section (GLM-4V's [8, 12, 12]) when the config
    has none (the config's own modeling module, or a sub-config's: GLM-4.6V's text model is GLM-4V's): sections
    summing to half the shrunk rotary size, written into each rope_parameters that lacks them."""
    for holder in _sub_dicts(d):
        rope = holder.get("rope_parameters")
        if not rope or not isinstance(rope, dict) or rope.get("mrope_section"):  # empty: per-layer-type, unfilled
            continue
        sub = holder.get("model_type")
        own = transformers.CONFIG_MAPPING[sub] if holder is not d and sub in transformers.CONFIG_MAPPING else cls
        default = _default_mrope(own)
        default = _default_mrope(cls) if default is None else default
        if default is None:
            continue
        hd = holder.get("head_dim") if isinstance(holder.get("head_dim"), int) else None
        if hd is None and isinstance(holder.get("hidden_size"), int) and isinstance(holder.get("num_attention_heads"), int):
            hd = holder["hidden_size"] // holder["num_attention_heads"]
        if hd:
            rope["mrope_section"] = _mrope_sections(default, int(hd * rope.get("partial_rotary_factor", 1.0)) // 2)


def _merge(d, overrides):
    """Overrides applied to d in place; a dict merges into the sub-config's dict, at any depth."""
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict):
            _merge(d[k], v)
        else:
            d[k] = v


def _drop_derived(cls, d, default):
    """Drop from `d` (in place, sub-configs too) the sizes `cls` derives in __post_init__ rather than takes (SAM's
    image_embedding_size = image_size // patch_size, BROS's bbox projection = its head size) where shrink() left
    the defaults' value and the shrunk config derives a smaller one: to_dict() writes the defaults' values, and
    passed back they would override the values derived from the shrunk sizes."""
    if not dataclasses.is_dataclass(cls):
        return
    fields = {f.name for f in dataclasses.fields(cls)}
    for k, sub in (getattr(cls, "sub_configs", None) or {}).items():
        if isinstance(d.get(k), dict) and isinstance(default.get(k), dict):
            sub = transformers.CONFIG_MAPPING.get(d[k].get("model_type")) if sub is transformers.AutoConfig else sub
            if isinstance(sub, type):
                _drop_derived(sub, d[k], default[k])
    stale = [k for k, v in d.items() if k not in fields and isinstance(v, int) and not isinstance(v, bool)
             and default.get(k) == v]
    if not stale:
        return
    try:
        derived = vars(cls(**{k: v for k, v in d.items() if k in fields}))
    except Exception:  # noqa: BLE001  (a config that only validates with its extras: keep them all)
        return
    for k in stale:
        if isinstance(derived.get(k), int) and 0 < derived[k] < d[k]:
            d.pop(k)


def tiny_config(model_type):
    cls = transformers.CONFIG_MAPPING[model_type]
    default = cls().to_dict()
    d = shrink(default)
    _drop_derived(cls, d, default)
    _default_mrope_sections(cls, d)
    _merge(d, OVERRIDES.get(model_type, {}))
    for k in _DROP:
        d.pop(k, None)
    d.pop("model_type", None)
    cfg = cls(**d)
    cfg._attn_implementation = ATTN_IMPLEMENTATION.get(model_type, "eager")
    # Sliding-window layers with no window set (Step-3.7's defaults derive the layer kinds after init): a window
    # shorter than the inputs.
    for c in (cfg, getattr(cfg, "text_config", None)):
        if c is not None and "sliding_attention" in (getattr(c, "layer_types", None) or []) \
                and vars(c).get("sliding_window", 0) is None:  # (vars: per-layer configs refuse the global read)
            c.sliding_window = 4
    return cfg


def _modeling_module(model_type):
    import importlib
    cfg_cls = transformers.CONFIG_MAPPING[model_type]
    try:
        return importlib.import_module(cfg_cls.__module__.replace(".configuration_", ".modeling_"))
    except Exception:  # noqa: BLE001
        return None


def _model_of_config(model_type):
    """The model class of the type's own modeling module whose config_class is the type's config (shortest
    name wins; exported from transformers first), for sub-configs the auto mappings do not list."""
    cfg_cls = transformers.CONFIG_MAPPING[model_type]
    mod = _modeling_module(model_type)
    if mod is None:
        return None
    names = [n for n, c in vars(mod).items() if isinstance(c, type) and getattr(c, "config_class", None) is cfg_cls
             and issubclass(c, transformers.PreTrainedModel) and not n.endswith("PreTrainedModel")]
    return min(names, key=lambda n: (not hasattr(transformers, n), len(n))) if names else None


def model_class(model_type, name):
    """The class `name`: exported from transformers, or else from the type's own modeling module (vision/audio
    towers of multimodal models that transformers does not export)."""
    cls = getattr(transformers, name, None)
    if cls is None:
        cls = getattr(_modeling_module(model_type), name, None)
    if cls is None:
        raise AttributeError(f"no class {name} for {model_type}")
    return cls


def config_for(cls, cfg):
    """The config `cls` takes: `cfg`, or its sub-config of the class's config_class (MusicgenForCausalLM, listed
    for musicgen, takes the decoder's config)."""
    want = getattr(cls, "config_class", None)
    if not isinstance(want, type) or isinstance(cfg, want):
        return cfg
    return next((v for v in vars(cfg).values() if isinstance(v, want)), cfg)


def classes(model_type):
    """(base model class name or None, (head task, head class name) or None)."""
    base = modeling_auto.MODEL_MAPPING_NAMES.get(model_type)
    if isinstance(base, (list, tuple)):
        base = base[0]
    if base is None:  # sub-configs (clip_text_model...): FooTextConfig -> FooTextModel
        base = configuration_auto.CONFIG_MAPPING_NAMES[model_type].replace("Config", "Model")
        if not hasattr(transformers, base):
            base = _model_of_config(model_type) or base
        if not hasattr(transformers, base) and getattr(_modeling_module(model_type), base, None) is not None:
            return base, None
    head = None
    for task, mapping in HEADS:
        name = getattr(modeling_auto, mapping).get(model_type)
        if isinstance(name, (list, tuple)):
            name = name[0]
        if name and hasattr(transformers, name):
            head = (task, name)
            break
    if base is not None and not hasattr(transformers, base):
        base = None
    return base, head


def _ids(g, shape, low=3, high=VOCAB):
    return torch.randint(low, high, shape, generator=g)


def _vocab(cfg):
    for c in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "decoder", None),
              getattr(cfg, "model_config", None)):  # (FastSpeech 2 with HiFi-GAN: the acoustic model's)
        v = getattr(c, "vocab_size", None) if c is not None else None
        if isinstance(v, int) and v > 3:
            return v
    return VOCAB


_get = auto_inputs.get


def _image_tokens(cfg):
    return any(getattr(cfg, k, None) is not None for k in ("image_token_id", "image_token_index", "video_token_index"))


def make_inputs(model_class, cfg, task, seed):
    """Synthetic inputs for `model_class` from its main_input_name (with labels where the head takes them)."""
    g = torch.Generator().manual_seed(seed)
    if model_class.__name__ in auto_inputs.CLASS_INPUTS:
        return auto_inputs.CLASS_INPUTS[model_class.__name__](cfg, g)
    name = getattr(model_class, "main_input_name", "input_ids")
    params = inspect.signature(model_class.forward).parameters
    if name == "input_ids" and "input_ids" not in params:
        # A tower that keeps PreTrainedModel's default main_input_name (GOT-OCR2's vision encoder, Kosmos-2.5's):
        # its forward's first input that a rule knows, where it is optional (a required one is filled below).
        name = next((n for n in params if n in ("pixel_values", "flattened_patches", "input_features",
                                                 "input_values", "pixel_values_videos")
                     and n not in auto_inputs.required(model_class)), name)
    hi = min(_vocab(cfg), VOCAB)
    inputs = {}
    codebooks = None
    if name == "input_ids":
        dims = auto_inputs.doc_shape(model_class, "input_ids")
        codebooks = _get(cfg, "num_codebooks") if dims and "num_codebooks" in dims[0] else None
        ids = _ids(g, (BATCH * codebooks if isinstance(codebooks, int) else BATCH, SEQ), 3, hi)  # MusicGen
        inputs = dict(input_ids=ids)
        if "attention_mask" in params:
            inputs["attention_mask"] = torch.ones_like(ids)
        if cfg.is_encoder_decoder and task not in ("seq2seq-lm",) and "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = _ids(g, (BATCH, 5), 3, hi)
    elif name == "pixel_values":
        ch = _get(cfg, "num_channels", default=3)
        size = _get(cfg, "image_size", default=IMAGE)
        hw = None
        if isinstance(size, (list, tuple)):
            # A small non-square size (MGP-STR's 32 x 128) is kept as is; otherwise square.
            if len(size) == 2 and size[0] != size[1] and all(isinstance(x, int) for x in size) and max(size) <= 128:
                hw = tuple(size)
            size = size[0]
        size = auto_inputs.fit_image(size)
        inputs = dict(pixel_values=torch.randn(BATCH, ch if isinstance(ch, int) else 3, *(hw or (size, size)),
                                               generator=g))
        dims = auto_inputs.doc_shape(model_class, "pixel_values")
        if dims and len(dims) == 5:  # videos, or image pairs (keypoint matchers): (batch, frames, C, H, W)
            inputs = dict(pixel_values=auto_inputs.video(cfg, g, int(dims[1]) if dims[1].isdigit() else None))
        elif auto_inputs.takes_image_pairs(model_class):
            inputs = dict(pixel_values=auto_inputs.video(cfg, g, 2))
        elif auto_inputs.is_video_model(model_class, cfg):  # generic docstrings say 4-D even for videos
            inputs = dict(pixel_values=auto_inputs.video(cfg, g))
        if model_class.__name__ in auto_inputs.FRAMES_IN_BATCH and inputs["pixel_values"].dim() == 5:
            inputs = dict(pixel_values=inputs["pixel_values"].flatten(0, 1))  # (batch x frames, C, H, W)
    elif name == "input_values":
        mel = _get(cfg, "num_mel_bins")
        if mel and _get(cfg, "max_length"):  # AST-like: spectrogram frames
            inputs = dict(input_values=torch.randn(BATCH, _get(cfg, "max_length"), mel, generator=g))
        else:
            inputs = dict(input_values=auto_inputs.audio_values(cfg, g, model_class))
    elif name == "input_features":
        inputs = dict(input_features=auto_inputs.audio_features(cfg, g, model_class))
        if "input_features_mask" in params and auto_inputs.used_unguarded(model_class, "input_features_mask"):
            auto_inputs.fill_required(model_class, cfg, inputs, g, hi, extra=["input_features_mask"])
        if "attention_mask" in params and inputs["input_features"].shape[1] != _get(cfg, "num_mel_bins"):
            inputs["attention_mask"] = torch.ones(BATCH, inputs["input_features"].shape[1], dtype=torch.long)
        if cfg.is_encoder_decoder and task is None and "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = _ids(g, (BATCH, 5), 3, hi)
        if "feature_lens" in params:  # Qwen-Omni audio towers: the batch's frames concatenated, (mel, frames)
            f = inputs["input_features"]
            inputs = dict(input_features=f.flatten(0, 1).T.contiguous(), feature_lens=torch.full((BATCH,), f.shape[1]))
    elif name == "inputs_embeds":
        inputs = dict(inputs_embeds=torch.randn(BATCH, SEQ, _get(cfg, "hidden_size", default=HIDDEN), generator=g))
    elif name == "pixel_values_videos":
        inputs = dict(pixel_values_videos=auto_inputs.video(cfg, g))
    elif isinstance(name, str):
        auto_inputs.fill_required(model_class, cfg, inputs, g, hi, extra=[name])
    # Required forward arguments the main input does not cover (grid_thw, a second modality, masks...).
    req = auto_inputs.required(model_class)
    if "pixel_values" in inputs and "pixel_values" not in params and "hidden_states" in req \
            and not any(n in req for n in ("grid_thw", "image_grid_thw")):
        inputs["hidden_states"] = inputs.pop("pixel_values")  # a backbone that names its image hidden_states
    if name == "input_ids" and "input_ids" not in params and any(n not in inputs for n in req):
        inputs = {}  # forward takes no input_ids (a tower whose main_input_name is the default)
    had_pixels = "pixel_values" in inputs
    # Patch-grid towers whose grid argument is optional in the signature but not in fact (SigLIP2's
    # classification head, Muse's vision towers): the grid rules as if it were required.
    grid = [n for n in ("spatial_shapes", "grid_thw") if n in params and n not in auto_inputs.required(model_class)]
    auto_inputs.fill_required(model_class, cfg, inputs, g, hi, extra=grid if had_pixels else ())
    if had_pixels and "pixel_values" not in params and "hidden_states" in inputs:
        inputs.pop("pixel_values")  # a Qwen-style tower takes its patches as hidden_states
    if isinstance(name, str) and name not in inputs and name in params \
            and not (name == "pixel_values" and "hidden_states" in inputs):
        raise NotImplementedError(f"no synthetic input for main_input_name {name!r}")
    # Two-tower models (CLIP-like: a text and a vision/audio config): both towers' inputs. Vision-language
    # decoders (an image token id in the config) run text-only: their image features need matching tokens.
    # (An image-first model with placeholder tokens, InstructBLIP, still gets the text it needs besides the image.)
    text_like = "input_ids" in params and "input_ids" not in inputs
    if getattr(cfg, "text_config", None) is not None and text_like \
            and (not _image_tokens(cfg) or "pixel_values" in inputs):
        ids = _ids(g, (BATCH, SEQ), 3, hi)
        inputs.update(input_ids=ids)
        if "attention_mask" in params:
            inputs["attention_mask"] = torch.ones_like(ids)
    if getattr(cfg, "vision_config", None) is not None and "pixel_values" in params and not _image_tokens(cfg) \
            and "pixel_values" not in inputs:
        vc = cfg.vision_config
        ch = getattr(vc, "num_channels", 3)
        size = getattr(vc, "image_size", IMAGE)
        size = size[0] if isinstance(size, (list, tuple)) else size
        size = auto_inputs.fit_image(size)
        inputs["pixel_values"] = torch.randn(BATCH, ch, size, size, generator=g)
        if auto_inputs.is_video_model(model_class, vc):  # X-CLIP: the vision tower takes frames
            inputs["pixel_values"] = auto_inputs.video(vc, g)
    if "visual_feats" in params and "input_ids" in inputs:  # LXMERT-like: region features are not optional
        auto_inputs.fill_required(model_class, cfg, inputs, g, hi, extra=["visual_feats"])
    if "pixel_mask" in params and "pixel_values" in params and "input_ids" in inputs and "pixel_values" not in inputs \
            and getattr(cfg, "vision_config", None) is None and not _image_tokens(cfg):
        # A one-tower vision-language encoder (ViLT) that needs its image as well as its text.
        inputs["pixel_values"] = auto_inputs.image(cfg, g)
        inputs["pixel_mask"] = torch.ones(BATCH, *inputs["pixel_values"].shape[-2:], dtype=torch.long)
    if "bbox" in params and "input_ids" in inputs:  # layout models: a box per token
        inputs["bbox"] = auto_inputs.bbox(model_class, g, inputs["input_ids"].shape[1])
    if cfg.is_encoder_decoder and "decoder_input_ids" in params and "input_ids" not in inputs \
            and "decoder_input_ids" not in inputs and not (LABELS.get(task) and "labels" in params):
        inputs["decoder_input_ids"] = _ids(g, (BATCH, 5), 3, hi)  # an encoder-decoder fed something else
    if "return_loss" in params and len(inputs) > 1:
        inputs["return_loss"] = True
    kind = LABELS.get(task)
    if kind and "labels" in params:
        if model_class.__name__ in LABELS_ARE_INPUT_IDS and "input_ids" in inputs:
            inputs["labels"] = inputs["input_ids"].clone()
        elif kind == "ids":
            inputs["labels"] = inputs["input_ids"].clone() if "input_ids" in inputs else None
            if name == "input_ids" and isinstance(codebooks, int):  # (batch, seq, codebooks)
                inputs["labels"] = inputs["labels"].view(BATCH, codebooks, -1).transpose(1, 2)
        elif kind == "masked":
            labels = torch.full_like(inputs["input_ids"], -100)
            labels[:, 1::2] = inputs["input_ids"][:, 1::2]
            inputs["labels"] = labels
        elif kind == "ids5":
            inputs["labels"] = _ids(g, (BATCH, 5), 3, hi)
        elif kind == "class":
            n = getattr(cfg, "num_labels", 2)
            inputs["labels"] = torch.randint(0, n, (BATCH,), generator=g)
        elif kind == "tokclass":
            n = getattr(cfg, "num_labels", 2)
            inputs["labels"] = torch.randint(0, n, (BATCH, SEQ), generator=g)
        elif kind == "ctc":
            inputs["labels"] = _ids(g, (BATCH, 4), 1, hi)
        inputs = {k: v for k, v in inputs.items() if v is not None}
    if "noise" in params and "pixel_values" in inputs:
        # ViTMAE-like random masking: pass the noise the model would draw, so tpu and CPU mask the same patches.
        size, patch = inputs["pixel_values"].shape[-1], _get(cfg, "patch_size", default=PATCH)
        patch = patch[0] if isinstance(patch, (list, tuple)) else patch
        inputs["noise"] = torch.rand(BATCH, (size // patch) ** 2, generator=g)
    return inputs
