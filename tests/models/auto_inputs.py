"""Synthetic inputs for forward arguments other than the main input (used by auto_zoo.make_inputs).

A model class's forward often requires more than its `main_input_name` (vision towers of vision-language
models, encoders of speech models...). `fill_required` synthesizes each *required* forward argument (no default)
that the main input did not provide, by its name and from the config:
  - Qwen-style vision towers (`grid_thw` / `image_grid_thw`): the pixels flattened to patches,
    (sum t*h*w, channels * temporal_patch * patch^2), with a grid of one frame and 2 x spatial_merge_size
    patches a side per image;
  - NaFlex-style towers (`spatial_shapes`, SigLIP2): (batch, patches, channels * patch^2) with a full
    `pixel_attention_mask` and the (h, w) patch grid per image;
  - `pixel_values` (an image of the config's channels and size), `pixel_values_videos` (frames of the config's
    num_frames), `input_values` / `input_features` (audio), their masks (all ones), `*_input_ids` (token ids);
  - `hidden_states` of a stand-alone encoder: (batch, seq, the config's input size).
Anything else is left missing (the CPU forward then reports it).
"""
import inspect
import math
import re

import torch

BATCH = 2
SEQ = 7
IMAGE = 32
PATCH = 8
AUDIO_SAMPLES = 1600
VOCAB = 99
# Tiny config sizes (auto_zoo.shrink).
HIDDEN = 32
HEADS_N = 4
KV_HEADS = 2
FFN = 37
FFN_MOE = 40
LAYERS = 2
EXPERTS = 4
TOPK = 2
QUERIES = 10
SSM_STATE = 16
SSM_CHUNK = 4


def _sub_configs(cfg):
    """The config's other sub-configs (Canary's encoder_config, NeuCodec's semantic_model_config...)."""
    return [v for k, v in vars(cfg).items() if not k.startswith("_") and hasattr(v, "to_dict")
            and k not in ("vision_config", "audio_config", "encoder", "text_config", "decoder", "decoder_config")]


def get(cfg, *keys, default=None):
    """The first of `keys` set on the config, its vision / audio / encoder sub-config, or another non-text one."""
    for c in (cfg, getattr(cfg, "vision_config", None), getattr(cfg, "audio_config", None),
              getattr(cfg, "encoder", None), *_sub_configs(cfg)):
        if c is None:
            continue
        for k in keys:
            v = getattr(c, k, None)
            if v is not None:
                return v
    return default


def fit_image(size):
    """The config's image size where it is small (a tiny config's), else IMAGE."""
    return size if isinstance(size, int) and size <= 64 else IMAGE


def _int(v, default):
    if isinstance(v, (list, tuple)) and v:
        v = v[0]
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def channels(cfg):
    return _int(get(cfg, "num_channels", "in_channels", "in_chans", "image_channels"), 3)


def image(cfg, g, batch=BATCH):
    size = _int(get(cfg, "image_size", "img_size", "input_size"), IMAGE)
    size = fit_image(size)
    return torch.randn(batch, channels(cfg), size, size, generator=g)


def video(cfg, g, frames=None):
    """(batch, frames, channels, size, size): the config's frame count (whole tubelets), or `frames` (image pairs)."""
    size = _int(get(cfg, "image_size", "crop_size", "img_size"), IMAGE)
    size = fit_image(size)
    if frames:
        return torch.randn(BATCH, frames, channels(cfg), size, size, generator=g)
    frames = _int(get(cfg, "num_frames", "frames_per_clip"), 2)
    tubelet = _int(get(cfg, "tubelet_size"), 1)
    frames = max(tubelet, min(frames, 16) // tubelet * tubelet)
    return torch.randn(BATCH, frames, channels(cfg), size, size, generator=g)


def takes_image_pairs(model_class):
    """Whether forward wants image pairs, (batch, 2, C, H, W), whatever its docstring says (keypoint matchers:
    SuperGlue, LightGlue check the shape in forward's source)."""
    try:
        return "(batch_size, 2, num_channels, height, width)" in inspect.getsource(model_class.forward)
    except (OSError, TypeError):
        return False


def is_video_model(model_class, cfg):
    """Whether `pixel_values` are videos: a frame count in the config, or a video class (InstructBLIP-Video) other
    than its vision tower (frames folded into the batch)."""
    name = model_class.__name__
    return isinstance(get(cfg, "num_frames"), int) or "Video" in name and not name.endswith("VisionModel")


def grid_patches(cfg, g, n=BATCH):
    """Qwen-VL-style flattened patches and their (t, h, w) grid: n images of 2m x 2m patches (m: merge size)."""
    p = _int(get(cfg, "patch_size", "spatial_patch_size"), PATCH)
    tp = _int(get(cfg, "temporal_patch_size", "patch_temporal"), 1)  # Muse's towers name it patch_temporal
    m = _int(get(cfg, "spatial_merge_size", "merge_size"), 2)
    side = 2 * m
    grid = torch.tensor([[1, side, side]] * n)
    return torch.randn(n * side * side, channels(cfg) * tp * p * p, generator=g), grid


def doc_shape(model_class, name):
    """The dimension names forward's docstring gives `name` ("(batch_size, 1, time_steps)" -> 3 names), or None."""
    m = re.search(rf"{name} \(`[^`]*` of shape `\(([^`]*)\)`", model_class.forward.__doc__ or "")
    return [x.strip() for x in m.group(1).split(",")] if m else None


def bbox(model_class, g, seq):
    """Boxes for layout models, (batch, seq, 4 or the documented width): corners sorted so x0 <= x1, y0 <= y1,
    integer coordinates in [0, 1000) (normalised floats where the docstring says FloatTensor)."""
    doc = model_class.forward.__doc__ or ""
    dims = doc_shape(model_class, "bbox")
    width = int(dims[-1]) if dims and dims[-1].isdigit() else 4
    pts = torch.randint(0, 1000, (BATCH, seq, width // 2, 2), generator=g)
    lo, hi = pts.min(2).values, pts.max(2).values
    box = torch.cat([lo, hi], -1) if width == 4 else pts.sort(2).values.flatten(2)
    m = re.search(r"bbox \(`([^`]*)`", doc)
    floats = m and "Float" in m.group(1) or model_class.__name__.startswith("Udop")  # (UDOP's doc says Long)
    return box.float() / 1000 if floats else box


# Video towers that take their frames folded into the batch, (batch x frames, C, H, W) (X-CLIP's).
FRAMES_IN_BATCH = {"XCLIPVisionModel"}

# Waveform towers that take (batch, channels, samples) with no docstring shape to say so.
WAVE_CHANNEL_FIRST = {"PeAudioModel", "PeAudioEncoder"}


def audio_values(cfg, g, model_class=None):
    """A waveform; (batch, channels, samples) where forward's docstring says so (codecs), the samples a multiple of
    the config's total downsampling."""
    dims = doc_shape(model_class, "input_values") if model_class is not None else None
    ratios = get(cfg, "downsampling_ratios", "patch_sizes")  # (MuseSpark's audio patches)
    n = AUDIO_SAMPLES
    if isinstance(ratios, (list, tuple)) and ratios and all(isinstance(r, int) for r in ratios):
        hop = math.prod(ratios)
        n = hop * max(1, -(-AUDIO_SAMPLES // hop))
    if dims and len(dims) == 3 and (dims[1] == "1" or "channel" in dims[1]) \
            or model_class is not None and model_class.__name__ in WAVE_CHANNEL_FIRST:
        ch = _int(get(cfg, "audio_channels", "channels"), 1)
        return torch.randn(BATCH, ch, n, generator=g)
    return torch.randn(BATCH, n, generator=g)


# Encoders whose input_features go channels first, (batch, mel, frames), whatever their docstring says (the first
# layer is a Conv1d inside a sub-module, which _conv1d_first does not see).
FEATURES_FIRST = {"Qwen3ASREncoder", "VoxtralRealtimeEncoder"}


# Encoders whose features are several mel frames stacked (the processor's job): num_mel_bins x this.
STACKED_FRAMES = {"GraniteSpeech5Encoder": 4, "GraniteSpeech5ForCTC": 4}


def _conv1d_first(model_class):
    """Whether forward feeds input_features straight into one of its nn.Conv1d layers (GLM-ASR's conv1): the
    features go channels first, as Whisper's do, whatever the docstring says."""
    try:
        fwd, init = inspect.getsource(model_class.forward), inspect.getsource(model_class.__init__)
    except (OSError, TypeError):
        return False
    return any(re.search(rf"self\.{m}\s*=\s*nn\.Conv1d\(", init)
               for m in re.findall(r"self\.(\w+)\(input_features\b", fwd))


def audio_features(cfg, g, model_class=None, frames=20):
    """Filterbank features, (batch, frames, features) or, where the docstring puts features first, transposed."""
    mel = get(cfg, "num_mel_bins")
    src = get(cfg, "max_source_positions")
    n_window = _int(get(cfg, "n_window"), None)
    if n_window:  # chunked encoders (Qwen-ASR): whole windows of 2 x n_window frames
        frames = 2 * n_window
    elif mel and src and 2 * src <= 3000:  # Whisper-like: mel x 2 * max_source_positions
        return torch.randn(BATCH, mel, 2 * src, generator=g)
    feat = get(cfg, "input_feat_per_channel", "feature_size", "num_mel_bins", "n_mel_bins", "input_dim", "n_mels",
               "feature_projection_input_dim", default=80)
    if model_class is not None:
        feat *= STACKED_FRAMES.get(model_class.__name__, 1)
    feat *= _int(get(cfg, "num_stacked_frames"), 1)  # low-frame-rate stacking the config names (Fun-ASR)
    dims = doc_shape(model_class, "input_features") if model_class is not None else None
    if dims and len(dims) == 3 and any(w in dims[1] for w in ("mel", "feature", "channel")) \
            or model_class is not None and (model_class.__name__ in FEATURES_FIRST or _conv1d_first(model_class)):
        return torch.randn(BATCH, feat, frames, generator=g)
    return torch.randn(BATCH, frames, feat, generator=g)


def used_unguarded(model_class, name):
    """Whether forward dereferences the optional argument `name` without a None check (AudioFlamingo3's encoder:
    `input_features_mask.sum(-1)`): required in fact."""
    try:
        src = inspect.getsource(model_class.forward)
    except (OSError, TypeError):
        return False
    return re.search(rf"\b{name}\.\w+\(", src) is not None and not re.search(rf"\b{name} is (not )?None", src)


def required(model_class):
    params = inspect.signature(model_class.forward).parameters
    return [n for n, p in params.items() if n != "self" and p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def fill_required(model_class, cfg, inputs, g, hi=VOCAB, extra=()):
    """Add the required forward arguments `inputs` lacks, and those named in `extra` (the main input where
    make_inputs has no rule for it), in place; returns inputs."""
    params = inspect.signature(model_class.forward).parameters
    need = [n for n in list(extra) + required(model_class) if n not in inputs]
    need = list(dict.fromkeys(need))
    if "states" in need and "actions" in params:  # Decision Transformer: a trajectory
        sd, ad = _int(get(cfg, "state_dim"), 4), _int(get(cfg, "act_dim"), 2)
        inputs.update(states=torch.randn(BATCH, SEQ, sd, generator=g), actions=torch.randn(BATCH, SEQ, ad, generator=g),
                      rewards=torch.randn(BATCH, SEQ, 1, generator=g),
                      returns_to_go=torch.randn(BATCH, SEQ, 1, generator=g),
                      timesteps=torch.arange(SEQ).repeat(BATCH, 1), attention_mask=torch.ones(BATCH, SEQ, dtype=torch.long))
    grid_name = next((n for n in ("grid_thw", "image_grid_thw") if n in need), None)
    if grid_name:
        # The pixels go in as `hidden_states` or `pixel_values`, whichever forward names (replacing a 4-D image).
        x, grid = grid_patches(cfg, g)
        pix = "hidden_states" if "hidden_states" in params else "pixel_values"
        inputs[pix] = x
        inputs[grid_name] = grid
        if "merge_sizes" in need:
            inputs["merge_sizes"] = torch.full((BATCH,), _int(get(cfg, "spatial_merge_size", "merge_size"), 2))
        need = [n for n in need if n not in inputs]
    if "spatial_shapes" in need:
        p = _int(get(cfg, "patch_size"), PATCH)
        side = 4
        inputs["pixel_values"] = torch.randn(BATCH, side * side, channels(cfg) * p * p, generator=g)
        inputs["spatial_shapes"] = torch.tensor([[side, side]] * BATCH)
        if "pixel_attention_mask" in params:
            inputs["pixel_attention_mask"] = torch.ones(BATCH, side * side, dtype=torch.long)
        need = [n for n in need if n not in inputs]
    for n in sorted(need, key=lambda n: (n != "hidden_states", n != "past_values")):
        if n in ("pixel_values", "image"):  # BridgeTower's vision tower names its pixels `image`
            inputs[n] = image(cfg, g)
        elif n == "pixel_values_videos":
            inputs[n] = video(cfg, g)
        elif n == "input_values":
            inputs[n] = audio_values(cfg, g, model_class)
        elif n == "input_features":
            inputs[n] = audio_features(cfg, g, model_class)
        elif n in ("input_features_mask", "feature_attention_mask", "input_features_attention_mask") \
                and "input_features" in inputs:
            f = inputs["input_features"]
            first = get(cfg, "max_source_positions") or model_class.__name__ in FEATURES_FIRST  # (batch, mel, frames)
            t = f.shape[-1] if first and f.shape[1] == get(cfg, "num_mel_bins") else f.shape[1]
            inputs[n] = torch.ones(BATCH, t, dtype=torch.long)
        elif n == "mask" and "hidden_states" in inputs and inputs["hidden_states"].dim() == 3:
            inputs[n] = torch.ones(inputs["hidden_states"].shape[:2], dtype=torch.bool)
        elif n.endswith("input_ids"):
            inputs[n] = torch.randint(3, hi, (BATCH, SEQ), generator=g)
        elif n.endswith("attention_mask") and n.replace("attention_mask", "input_ids") in inputs:
            inputs[n] = torch.ones_like(inputs[n.replace("attention_mask", "input_ids")])
        elif n == "spectrogram":  # HiFi-GAN vocoders: (batch, frames, model_in_dim)
            inputs[n] = torch.randn(BATCH, SEQ, _int(get(cfg, "model_in_dim", "num_mel_bins"), 80), generator=g)
        elif n == "past_values":  # time series: (batch, context, channels), or (batch, context) univariate
            ctx = _int(get(cfg, "context_length", "context_len"), 32)
            lags = get(cfg, "lags_sequence")
            if isinstance(lags, (list, tuple)) and lags:  # lag features look back max(lags) steps further
                ctx += max(lags)
            ch = _int(get(cfg, "num_input_channels"), None)
            inputs[n] = torch.randn(*((BATCH, ctx, ch) if ch else (BATCH, ctx)), generator=g)
        elif n in ("past_time_features", "past_observed_mask") and "past_values" in inputs:
            # Lag-based forecasters (TimeSeriesTransformer, Informer, Autoformer): the time features and an
            # all-observed mask over the same steps (past_values is sized for the lags below).
            b, t = inputs["past_values"].shape[:2]
            inputs[n] = (torch.randn(b, t, _int(get(cfg, "num_time_features"), 0), generator=g)
                         if n == "past_time_features" else torch.ones(inputs["past_values"].shape))
        elif n == "past_values_padding" and "past_values" in inputs:  # nothing padded
            inputs[n] = torch.zeros(inputs["past_values"].shape[:2])
        elif n == "freq":  # TimesFM's frequency class (0: high)
            inputs[n] = torch.zeros(BATCH, 1, dtype=torch.long)
        elif n == "flattened_patches":  # Pix2Struct: (row, column, patch pixels) per patch, rows/columns from 1
            side = 4
            idx = torch.arange(side * side)
            rc = torch.stack([idx // side + 1, idx % side + 1], -1).float().expand(BATCH, -1, -1)
            dim = _int(get(cfg, "patch_embed_hidden_size"), channels(cfg) * PATCH * PATCH)
            inputs[n] = torch.cat([rc, torch.randn(BATCH, side * side, dim, generator=g)], -1)
            if "attention_mask" in params:
                inputs["attention_mask"] = torch.ones(BATCH, side * side)
        elif n == "audio_mel":  # Gemma-3n audio: (batch, frames, features) and its padding mask (all valid)
            inputs[n] = torch.randn(BATCH, 32, _int(get(cfg, "input_feat_size", "num_mel_bins"), 128), generator=g)
            if "audio_mel_mask" in params:
                inputs["audio_mel_mask"] = torch.zeros(BATCH, 32, dtype=torch.bool)
        elif n == "visual_feats":  # LXMERT: region features and their boxes
            inputs[n] = torch.randn(BATCH, 5, _int(get(cfg, "visual_feat_dim"), 32), generator=g)
            inputs["visual_pos"] = torch.rand(BATCH, 5, _int(get(cfg, "visual_pos_dim"), 4), generator=g)
        elif n == "inputs_embeds":  # a tower fed embeddings only (BLT's global transformer)
            inputs[n] = torch.randn(BATCH, SEQ, _int(get(cfg, "hidden_size"), 32), generator=g)
        elif n == "hidden_states":
            dim = get(cfg, "input_dim", "input_size", "in_channels", "hidden_size", default=32)
            if isinstance(dim, int):
                inputs[n] = torch.randn(BATCH, SEQ * 4, dim, generator=g)
        else:
            t = by_doc_shape(model_class, cfg, n, g)
            if t is not None:
                inputs[n] = t
    if "lang_ids" in params and "lang_ids" not in inputs and "input_ids" in inputs:  # X-MOD: the first language
        inputs["lang_ids"] = torch.zeros(inputs["input_ids"].shape[0], dtype=torch.long)
    return inputs


def by_doc_shape(model_class, cfg, name, g):
    """A required argument no rule above knows, from the shape forward's docstring gives it, where every dimension
    is a known size: batch, sequence, hidden, channels, height/width, frames. Masks (and long tensors) are all ones;
    float tensors are drawn normal. None where the shape has another dimension or is not documented."""
    dims = doc_shape(model_class, name)
    if not dims:
        return None
    size = _int(get(cfg, "image_size"), IMAGE)
    size = fit_image(size)
    hidden = _int(get(cfg, "hidden_size", "embed_dim", "d_model"), 32)
    known = {"batch_size": BATCH, "batch": BATCH, "sequence_length": SEQ, "seq_len": SEQ, "hidden_size": hidden,
             "embed_dim": hidden, "num_channels": channels(cfg), "height": size, "width": size, "image_size": size,
             "frames": 4}  # (codec latents: Mimi's decoder)
    if not all(d in known for d in dims):
        return None
    shape = [known[d] for d in dims]
    doc = model_class.forward.__doc__ or ""
    m = re.search(rf"{name} \(`([^`]*)`", doc)
    if "mask" in name or m and "Long" in m.group(1):
        return torch.ones(shape, dtype=torch.long)
    return torch.randn(shape, generator=g)




def _mllama_vision(cfg, g):
    tiles = _int(get(cfg, "max_num_tiles"), 4)
    size = _int(get(cfg, "image_size"), IMAGE)
    size = fit_image(size)
    return dict(pixel_values=torch.randn(BATCH, 1, tiles, channels(cfg), size, size, generator=g),
                aspect_ratio_ids=torch.ones(BATCH, 1, dtype=torch.long),
                aspect_ratio_mask=torch.ones(BATCH, 1, tiles, dtype=torch.long))


def _text(g):
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids))


def _clap_features(cfg, g):
    frames = cfg.spec_size * (cfg.spec_size // cfg.num_mel_bins)
    return torch.randn(BATCH, 1, frames, cfg.num_mel_bins, generator=g)


def _text_and_codes(cfg, g, labels=False):
    high = min(cfg.vocab_size, cfg.codebook_vocab_size)
    ids = torch.randint(3, high, (BATCH, SEQ, 1 + cfg.num_codebooks), generator=g)
    inputs = dict(input_ids=ids, attention_mask=torch.ones(BATCH, SEQ, dtype=torch.long))
    if labels:
        inputs["labels"] = ids[..., 0].clone()
    return inputs


def _perceiver_text(cfg, g):
    ids = torch.randint(3, VOCAB, (BATCH, cfg.max_position_embeddings), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, 1::2] = ids[:, 1::2]
    return dict(inputs=ids, attention_mask=torch.ones_like(ids), labels=labels)


def _decoder(cfg, g, width):
    return dict(input_ids=torch.randint(3, VOCAB, (BATCH, SEQ), generator=g),
                encoder_hidden_states=torch.randn(BATCH, SEQ, width, generator=g))


def _voxtral_realtime(cfg, g, labels=False):
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
    frames = SEQ * cfg.audio_length_per_tok
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                  input_features=torch.randn(BATCH, cfg.audio_config.num_mel_bins, frames, generator=g))
    if labels:
        inputs["labels"] = ids.clone()
    return inputs


def _semantic_codec(cfg, g, frames=5):
    hop = math.prod(cfg.downsampling_ratios)
    dim = cfg.semantic_model_config.feature_projection_input_dim
    return dict(input_values=torch.randn(BATCH, 1, hop * frames, generator=g),
                input_features=torch.randn(BATCH, frames, dim, generator=g))


def _dia(cfg, g, labels=False):
    dec = cfg.decoder_config
    inputs = dict(input_ids=torch.randint(3, cfg.encoder_config.vocab_size, (BATCH, SEQ), generator=g),
                  attention_mask=torch.ones(BATCH, SEQ, dtype=torch.long),
                  decoder_input_ids=torch.randint(3, dec.vocab_size, (BATCH, 5, dec.num_channels), generator=g))
    if labels:
        inputs["labels"] = torch.randint(3, dec.vocab_size, (BATCH * dec.num_channels, 5), generator=g)
    return inputs


# The few classes whose forward no name rule can feed (kept small: a generic rule first wherever one works).
CLASS_INPUTS = {
    # Acoustic tokenizer halves: the encoder takes the waveform (batch, 1, samples) as hidden_states, the decoder
    # latents (batch, hidden, frames).
    "VibeVoiceAcousticTokenizerEncoderModel": lambda cfg, g: dict(
        hidden_states=torch.randn(BATCH, _int(get(cfg, "channels"), 1), 3200, generator=g)),
    "VibeVoiceAcousticTokenizerDecoderModel": lambda cfg, g: dict(
        hidden_states=torch.randn(BATCH, _int(get(cfg, "hidden_size"), 32), 2, generator=g)),
    # Patches flattened by the processor, one per positional embedding: (batch, patches, channels x patch^2).
    "Molmo2VisionModel": lambda cfg, g: dict(pixel_values=torch.randn(
        BATCH, cfg.num_position_embeddings, channels(cfg) * cfg.patch_size ** 2, generator=g)),
    # One image of max_num_tiles tiles, every tile real, aspect ratio id 1.
    "MllamaVisionModel": _mllama_vision,
    # Learned queries (the Q-Former's own input): (batch, queries, hidden).
    "Blip2QFormerModel": lambda cfg, g: dict(
        query_embeds=torch.randn(BATCH, 4, _int(get(cfg, "hidden_size"), 32), generator=g),
        encoder_hidden_states=torch.randn(BATCH, SEQ, _int(get(cfg, "encoder_hidden_size"), 32), generator=g)),
    # text / audio types (nbb)
    # BLT's byte encoder and decoder (inside BltModel): tokens grouped into patches of 4, and the global model's
    # patch states the decoder cross-attends to.
    "BltLocalEncoder": lambda cfg, g: dict(
        input_ids=torch.randint(3, VOCAB, (BATCH, SEQ), generator=g), num_patches=-(-SEQ // 4),
        patch_ids=(torch.arange(SEQ) // 4).expand(BATCH, -1)),
    "BltLocalDecoder": lambda cfg, g: dict(
        inputs_embeds=torch.randn(BATCH, SEQ, cfg.hidden_size, generator=g),
        patch_embeds=torch.randn(BATCH, -(-SEQ // 4), cfg.hidden_size_global, generator=g)),
    # Mel chunks (chunks, mel bins, frames) and each chunk's length in waveform samples.
    "Dots3NoteAudioModel": lambda cfg, g: dict(
        input_features=torch.randn(BATCH, cfg.feature_size, 20, generator=g),
        chunk_sample_lengths=torch.full((BATCH,), 20 * cfg.hop_length)),
    # CLVP: text, and the voice to condition on (mel features, (batch, feature_size, frames)); a contrastive loss.
    "ClvpModelForConditionalGeneration": lambda cfg, g: dict(
        **_text(g),
        input_features=torch.randn(BATCH, cfg.decoder_config.feature_size, 20, generator=g), return_loss=True),
    # CLAP's audio tower: (batch, 1, frames, mel bins), the frames its spectrogram image holds (spec_size x
    # spec_size / mel bins); the model adds text.
    "ClapAudioModel": lambda cfg, g: dict(input_features=_clap_features(cfg, g)),
    "ClapModel": lambda cfg, g: dict(
        **_text(g),
        input_features=_clap_features(cfg.audio_config, g), return_loss=True),
    # Gemma 4's audio tower: its projection after two stride-2 convolutions is sized for as many mel bins as the
    # first convolution's channels (128 both), which the config does not name otherwise.
    "Gemma4AudioModel": lambda cfg, g: dict(
        input_features=torch.randn(BATCH, 20, cfg.subsampling_conv_channels[0], generator=g),
        attention_mask=torch.ones(BATCH, 20, dtype=torch.long)),
    # Frames a whole number of the subsampling factor's groups, (batch, frames, mel bins).
    "Nemotron3_5TranscribeAudioModel": lambda cfg, g: dict(
        input_features=torch.randn(BATCH, 3 * cfg.subsampling_factor, get(cfg, "num_mel_bins"), generator=g)),
    # Dia: text bytes in, audio codes (batch, frames, channels) out (its 2-D (batch x channels, frames) path views a
    # transposed tensor and fails), labels (batch x channels, frames); its decoder cross-attends to the encoder.
    "DiaModel": lambda cfg, g: _dia(cfg, g),
    "DiaForConditionalGeneration": lambda cfg, g: _dia(cfg, g, labels=True),
    "DiaDecoder": lambda cfg, g: dict(
        input_ids=torch.randint(3, cfg.vocab_size, (BATCH, 5, cfg.num_channels), generator=g),
        encoder_hidden_states=torch.randn(BATCH, SEQ, cfg.cross_hidden_size, generator=g)),
    # Audio token models: a text stream and num_codebooks audio streams per step, (batch, seq, 1 + codebooks) (the
    # LM's labels are the text); Inkling's audio tower, the codebooks alone.
    "KyutaiSpeechToTextModel": lambda cfg, g: _text_and_codes(cfg, g),
    "KyutaiSpeechToTextForConditionalGeneration": lambda cfg, g: _text_and_codes(cfg, g, labels=True),
    "InklingAudioModel": lambda cfg, g: dict(
        audio_input_ids=torch.randint(0, cfg.codebook_size, (BATCH, SEQ, cfg.num_codebooks), generator=g)),
    # Moshi's depth decoder: a text token then codebook tokens (one weight per position), contextualised by the main
    # decoder's last hidden state.
    "MoshiDepthDecoder": lambda cfg, g: dict(
        input_ids=torch.randint(3, VOCAB, (BATCH, SEQ), generator=g),
        last_hidden_state=torch.randn(BATCH, SEQ, cfg.input_size, generator=g)),
    # Perceiver: the masked LM embeds token ids itself; the bare model takes embeddings (batch, seq, d_model).
    "PerceiverForMaskedLM": lambda cfg, g: _perceiver_text(cfg, g),
    "PerceiverModel": lambda cfg, g: dict(inputs=torch.randn(BATCH, SEQ, cfg.d_model, generator=g)),
    # PE Audio: text and a waveform (batch, 1, samples) of one frame of the audio tower's DAC codec (whose ratios are
    # a sub-config too deep for `get`).
    "PeAudioModel": lambda cfg, g: dict(
        **_text(g),
        input_values=torch.randn(BATCH, 1, math.prod(cfg.audio_config.dac_config.downsampling_ratios), generator=g),
        return_loss=True),
    # Voxtral Realtime adds each audio token's embedding to a text token's: (batch, mel, frames) features of
    # audio_length_per_tok frames per text token; the LM's labels are its tokens.
    "VoxtralRealtimeModel": lambda cfg, g: _voxtral_realtime(cfg, g),
    "VoxtralRealtimeForConditionalGeneration": lambda cfg, g: _voxtral_realtime(cfg, g, labels=True),
    # A speech encoder-decoder (wav2vec2 -> BERT by default) names its waveform `inputs`.
    "SpeechEncoderDecoderModel": lambda cfg, g: dict(
        inputs=audio_values(cfg.encoder, g), labels=torch.randint(3, VOCAB, (BATCH, 5), generator=g)),
    # Codecs with a semantic (wav2vec2-BERT) encoder beside the acoustic one, their outputs concatenated per frame:
    # the features (batch, frames, 2 x 80 stacked mel bins) one per acoustic frame of the waveform.
    "Xcodec2Model": lambda cfg, g: _semantic_codec(cfg, g),
    "NeuCodecModel": lambda cfg, g: _semantic_codec(cfg, g),
    # Muse Glimmer's drafter: a block of noised embeddings denoised against the target model's hidden states (the
    # selected layers' concatenated), as the target would hand them over.
    "MuseGlimmerAssistantModel": lambda cfg, g: dict(
        noise_embeds=torch.randn(BATCH, cfg.block_size, cfg.hidden_size, generator=g),
        context_hidden_states=torch.randn(BATCH, SEQ, cfg.hidden_size * len(cfg.target_layer_ids), generator=g)),
    # Decoders that need the encoder's states: (batch, seq, hidden) (PP-FormulaNet's keeps the vision
    # main_input_name).
    "T5Gemma2Decoder": lambda cfg, g: _decoder(cfg, g, cfg.hidden_size),
    "PPFormulaNetTextModel": lambda cfg, g: _decoder(cfg, g, cfg.d_model),
    # Qwen3-Omni's talker and its code predictor take embeddings only (forward refuses input_ids).
    "Qwen3OmniMoeTalkerModel": lambda cfg, g: dict(inputs_embeds=torch.randn(BATCH, SEQ, cfg.hidden_size, generator=g)),
    "Qwen3OmniMoeTalkerCodePredictorModel": lambda cfg, g: dict(
        inputs_embeds=torch.randn(BATCH, SEQ, cfg.hidden_size, generator=g)),
}
