"""Per-type settings of the tiny configs (auto_zoo.tiny_config): the few model types a generic shrink rule cannot
make tiny (OVERRIDES: kwargs merged into the shrunk config dict, at any depth, each with the reason), shared
setting groups, and the types whose eager attention is broken in transformers itself (ATTN_IMPLEMENTATION)."""
from auto_inputs import EXPERTS, FFN, FFN_MOE, HEADS_N, HIDDEN, IMAGE, LAYERS, PATCH, SEQ, TOPK, VOCAB

# The few types a generic rule cannot make tiny (kwargs applied to the shrunk dict, by model type).
SPEECH_CONV = dict(conv_dim=[16, 16], conv_stride=[5, 4], conv_kernel=[10, 8], num_conv_pos_embeddings=16,
                   num_conv_pos_embedding_groups=2, num_feat_extract_layers=2, mask_time_prob=0.0,
                   ctc_loss_reduction="mean")
CLVP_ENCODER = dict(hidden_size=4 * HIDDEN, projection_dim=4 * HIDDEN, num_attention_heads=2)
CLAP_AUDIO = dict(spec_size=32, num_mel_bins=16, patch_stride=[2, 2], patch_embeds_hidden_size=HIDDEN // 8)
QWEN4_TEXT = dict(indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=HIDDEN // HEADS_N, indexer_budget=4,
                  indexer_compress_ratio=2, hc_lowrank=HIDDEN)
COMPASS_ROPE = {"full_attention": dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 1, 1])}
OVERRIDES = {
    # Defaults have no attention layer at all, and a Mamba-only cache breaks transformers' own forward on CPU.
    "bamba": dict(attn_layer_indices=[1]),
    "granitemoehybrid": dict(layer_types=["attention", "mamba"]),  # the same (all-Mamba defaults)
    # Validators that want an even feed-forward size (the generic 37 is odd on purpose).
    # (and 4 codebooks, not 32; the Mimi codec inside with 8 filters, not 64: 22M parameters)
    "kyutai_speech_to_text": dict(ffn_dim=FFN + 1, num_codebooks=4, codec_config=dict(num_filters=8)),
    "moshi": dict(ffn_dim=FFN + 1, depth_decoder_config=dict(ffn_dim=FFN + 1)),
    "moshi_depth": dict(ffn_dim=FFN + 1, input_size=HIDDEN),  # (and the main decoder's width, not 4096)
    # Defaults with no vocabulary (ESM's come from its tokenizer) or no layer pattern at all.
    "esm": dict(vocab_size=VOCAB, pad_token_id=1, mask_token_id=2),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"]),
    # Grouped 1x1 convolutions: the feed-forward size must divide by intermediate_groups (4).
    "squeezebert": dict(intermediate_size=FFN_MOE),
    # The vision tower's attention has hidden_size // 64 heads (nn.MultiheadAttention): 64 wide at least.
    "bridgetower": dict(vision_config=dict(hidden_size=64)),
    "bridgetower_vision_model": dict(hidden_size=64),
    # Builds its sliding-window mask even with no sliding layer, and the default window is unset.
    "step3p5": dict(sliding_window=4),
    "step3p7": dict(text_config=dict(sliding_window=4)),
    # A non-square default image (256 x 192) the position embeddings are sized for: the synthetic 32 x 32.
    "vitpose": dict(backbone_config=dict(image_size=[IMAGE, IMAGE])),
    "vitpose_backbone": dict(image_size=[IMAGE, IMAGE]),
    # Hiera (SAM2's backbone): the stem's width is the first stage's; the neck's channel list and feature sizes
    # follow the stages (reversed) and the 32 x 32 image (a quarter, an eighth, a sixteenth).
    "sam2_hiera_det_model": dict(hidden_size=16, image_size=[IMAGE, IMAGE]),
    "sam2_vision_model": dict(backbone_config=dict(hidden_size=16, image_size=[IMAGE, IMAGE]),
                              backbone_channel_list=[128, 64, 32, 16], backbone_feature_sizes=[[8, 8], [4, 4], [2, 2]]),
    # The bottleneck (the width the layers run at) as wide as the shrunk hidden size.
    "mobilebert": dict(intra_bottleneck_size=HIDDEN),
    # Position embeddings sized for the default [224, 224] (a list the int image_size rule does not shrink).
    "hiera": dict(image_size=[IMAGE, IMAGE]),
    # Derived widths the defaults serialise: Mamba heads (64 x 2 / 8 heads: 8, not 640) and the shared attention,
    # which runs on the hidden state and the embeddings concatenated (2 x 32).
    "zamba2": dict(mamba_headdim=2 * HIDDEN // 8, attention_hidden_size=2 * HIDDEN,
                   attention_head_dim=2 * HIDDEN // HEADS_N, kv_channels=2 * HIDDEN // HEADS_N, hybrid_layer_ids=[1]),
    # Intermediate layers taken from a 2-layer encoder, and as few global layers.
    "mllama_vision_model": dict(intermediate_layers_indices=[0, 1], num_global_layers=LAYERS),
    # Config validators the generic sizes break, fixed consistently:
    # KV-sharing layers (the last N reuse earlier layers' caches): none of 2 layers.
    "gemma3n_text": dict(num_kv_shared_layers=0),
    # Sliding-window attention's head_dim = qk_nope_head_dim + qk_rope_head_dim (8 = 4 + 4).
    "dots3_note_text": dict(qk_nope_head_dim=4, qk_rope_head_dim=4),
    # The adaptor's width is the text model's hidden size / 4.
    "fun_asr_nano": dict(adaptor_config=dict(intermediate_size=HIDDEN // 4)),
    # The flow head is conditioned on the backbone's hidden state.
    "gradium_phonon_tts": dict(flow_head_config=dict(condition_dim=HIDDEN)),
    "pocket_tts": dict(flow_head_config=dict(condition_dim=HIDDEN)),
    # The adapter reads vision layers that exist in a 2-layer tower.
    "molmo2": dict(adapter_config=dict(vision_feature_layer=[1, 0])),
    # The 32 x 32 image's 4 x 4 patches split into 2 x 2 windows (16 windows need 64 x 64 at least).
    "lw_detr_vit": dict(num_windows=4, num_windows_side=2),
    # LeViT's patch embedding is four stride-2 convolutions: the patch size must stay 16.
    "levit": dict(patch_size=16),
    # Five stride-2 stages: 32 x 32 vanishes before the last one.
    "mobilevitv2": dict(image_size=2 * IMAGE),
    # Weights drawn N(0, 0.01) shrink the signal ~10x a layer at tiny widths: by the encoder every position's
    # features are equal (1e-19 apart), so the query top-k picks among exact ties (whose order CPU leaves
    # unspecified). At 0.3 they stay apart. V3's mask head reads HGNet's first stage (128 channels, 16 tiny).
    "pp_doclayout_v2": dict(initializer_range=0.3, backbone_config=dict(initializer_range=0.3)),
    "pp_doclayout_v4": dict(initializer_range=0.3, backbone_config=dict(initializer_range=0.3)),
    # Text-line recognisers: a 48 x 128 line (the synthetic image's size) keeps a row after their 16-32x vertical
    # downsampling and (3, 2) pool, which a 32 x 32 image does not.
    "pp_ocrv5_server_rec": dict(image_size=[48, 128]),
    "pp_ocrv6_small_rec": dict(image_size=[48, 128]),
    "pp_ocrv6_tiny_rec": dict(image_size=[48, 128]),
    "pp_doclayout_v3": dict(x4_feat_dim=16, initializer_range=0.3, backbone_config=dict(initializer_range=0.3)),
    # BROS's 1-D box sinusoid is hidden / 4 / dim_bbox (8) wide and halved: 64 wide at least.
    "bros": dict(hidden_size=2 * HIDDEN),
    # The vision neck's output is the image embedding the prompt encoder and mask decoder add to (their width),
    # and its positional embedding (sine and cosine of num_pos_feats each) is added to it too.
    "sam": dict(vision_config=dict(output_channels=HIDDEN, num_pos_feats=HIDDEN // 2)),
    "sam_hq": dict(vision_config=dict(output_channels=HIDDEN, num_pos_feats=HIDDEN // 2)),
    # A list image size (378 x 378) the int rule does not shrink; the positional embeddings are one per patch.
    "molmo2_vision": dict(image_size=[IMAGE, IMAGE], num_position_embeddings=(IMAGE // PATCH) ** 2),
    # SuperPoint's descriptors are what SuperGlue matches: as wide as its hidden size.
    "superglue": dict(keypoint_detector_config=dict(descriptor_decoder_dim=HIDDEN)),
    # One expert (a dense MoE block) still runs CPU's grouped_mm: 16-byte strides.
    "hunyuan_v1_moe": dict(intermediate_size=FFN_MOE),
    # text / audio types (nbb)
    # Sub-configs that read dropout_rate, which only the parent T5Gemma2Config writes into them.
    "t5gemma2_decoder": dict(dropout_rate=0.0),
    "t5gemma2_encoder": dict(text_config=dict(dropout_rate=0.0)),
    "t5gemma2_text": dict(dropout_rate=0.0),
    # Fields the model reads but the config class does not define (checkpoints' config.json carry them).
    "qwen2_5_omni_thinker": dict(vision_start_token_id=VOCAB - 9),
    "qwen3_omni_moe_thinker": dict(vision_start_token_id=VOCAB - 9),
    "qwen3_omni_moe_talker_text": dict(shared_expert_intermediate_size=FFN_MOE),
    "dbrx": dict(attn_config=dict(rope_theta=500000.0, clip_qkv=8.0)),  # (clip_qkv None: clamp(None, None) fails)
    "pix2struct_text_model": dict(initializer_range=0.02),
    "moonshine_streaming": dict(num_key_value_heads=HEADS_N),
    # Rotary parameters per layer type, empty in the defaults (the rotary embedding indexes them by layer type);
    # sections summing to half the head size.
    "cohere_compass_text": dict(rope_parameters=COMPASS_ROPE),
    "cohere_compass": dict(text_config=dict(rope_parameters=COMPASS_ROPE)),
    # MoE layers, but no expert count, top-k or expert width in the defaults (their checkpoints' config.json have them).
    "diffusion_gemma_text": dict(num_experts=EXPERTS, top_k_experts=TOPK, moe_intermediate_size=FFN_MOE),
    "diffusion_gemma": dict(text_config=dict(num_experts=EXPERTS, top_k_experts=TOPK, moe_intermediate_size=FFN_MOE),
                            canvas_length=8),  # (the block diffusion canvas: 256 tokens)
    "dots1": dict(n_routed_experts=EXPERTS, num_experts_per_tok=TOPK, n_shared_experts=1,
                  moe_intermediate_size=FFN_MOE),
    # Dots3: attention as dots3_note_text's; the adapters project to the text width; the convolution stem's output
    # width (the config derives it from the defaults' 480 channels: 32 x 128 mel bins / 8).
    "dots3_note": dict(text_config=dict(qk_nope_head_dim=4, qk_rope_head_dim=4),
                       vision_config=dict(adapter_out_dim=HIDDEN),
                       audio_config=dict(adapter_out_dim=HIDDEN, conv_output_size=HIDDEN * 16)),
    "dots3_note_audio_encoder": dict(adapter_out_dim=HIDDEN, conv_output_size=HIDDEN * 16),
    # CLVP's rotary size is max(projection_dim / (2 x heads), 32): heads 64 wide, of which 32 rotate (as the defaults).
    "clvp_encoder": CLVP_ENCODER,
    "clvp": dict(text_config=CLVP_ENCODER, speech_config=CLVP_ENCODER),
    # CLAP's audio Swin: a 32 x 32 spectrogram image (16 mel bins x 64 frames folded twice), the patch stride the
    # patch size (the Swin rule's 2), and the hidden size the last of 4 stages' widths (the first's x 8), as in the
    # defaults.
    "clap_audio_model": CLAP_AUDIO,
    "clap": dict(audio_config=CLAP_AUDIO),
    # One transcription layer and one timestamp layer (the defaults' 50 and 20).
    "fun_asr_nano_encoder": dict(num_timestamp_prediction_layers=1),
    # HRM serialises its derived cache size (layers per stack x cycles) as num_hidden_layers: the per-stack count is
    # derived again from the shrunk one.
    "hrm_text": dict(num_layers_per_stack=None),
    # Griffin's block pattern cycles (recurrent, recurrent, attention): its first two have no attention layer, and
    # the cache then has none to count the sequence with.
    "recurrent_gemma": dict(block_types=["recurrent", "attention"]),
    # xLSTM rounds its query/key and value widths (hidden x 0.5, x 1) up to multiples of 64, its projections do not:
    # a hidden size where they agree.
    "xlstm": dict(hidden_size=4 * HIDDEN, embedding_dim=4 * HIDDEN),
    # Zamba shares one attention block among its hybrid layers (tied to the first: two needed, else the tie matches
    # nothing); the block runs on the hidden state and the embeddings concatenated (2 x 32).
    "zamba": dict(num_hidden_layers=3, layers_block_type=["hybrid", "linear_attention", "hybrid"],
                  attention_hidden_size=2 * HIDDEN, attention_head_dim=2 * HIDDEN // HEADS_N),
    # The Yes / No token ids the classifier reads (model defaults 10784 / 3771, beyond the tiny vocabulary).
    "shieldgemma2": dict(yes_token_index=VOCAB - 10, no_token_index=VOCAB - 11),
    # Codec decoders: SEANet's channels double from num_filters over 4 upsampling stages (64: 11M parameters).
    "mimi_decoder": dict(num_filters=8),
    "pocket_tts_audio_tokenizer_decoder": dict(num_filters=8),
    # Half the full-attention heads rotate (the M-RoPE axes take frequencies in pairs of pairs: 2 of 8 is too few).
    "neomme": dict(rope_parameters=dict(full_attention=dict(partial_rotary_factor=0.5))),
    # One stage per layer: the stage lists as long as the shrunk layer count.
    "muse_spark_audio": dict(hidden_sizes=[16, 32], depths=[1, 1]),
    "muse_spark": dict(audio_config=dict(hidden_sizes=[16, 32], depths=[1, 1])),
    # Chameleon's image-token map comes from its tokenizer (None in the defaults): just the image placeholder.
    "chameleon": dict(vocabulary_map={"<image>": VOCAB - 9},  # (and a VQ-GAN of 32-128 channels, not 128-512: 27M)
                      vq_config=dict(base_channels=HIDDEN, latent_channels=HIDDEN, num_embeddings=64,
                                     num_res_blocks=1)),
    # Perceiver: 8 latents 32 wide through 2 self-attention blocks (the defaults' 256 x 1280 through 26: 260M); its
    # masked LM decodes one query per position: the text as long as max_position_embeddings (its tokenizer pads).
    "perceiver": dict(num_latents=8, d_latents=HIDDEN, num_self_attends_per_block=LAYERS,
                      max_position_embeddings=SEQ + 1),
    # PE Audio's DAC encoder doubles its channels over 4 stages (32 -> 512: 6M parameters): from 8.
    "pe_audio": dict(audio_config=dict(dac_config=dict(encoder_hidden_size=8))),
    # Labels are shifted right with the decoder's start and pad tokens, which only a checkpoint's config sets.
    "speech-encoder-decoder": dict(decoder_start_token_id=2, pad_token_id=0),
    # Semantic codecs quantize the semantic and acoustic states concatenated (2 x 1024 in the defaults): 2 x 32; the
    # acoustic encoder doubles its channels over its stages (5: 32 -> 1024, 15M parameters; many small anti-aliasing
    # ops, over 90 s on tpu): 2 stages from 4.
    "xcodec2": dict(quantization_dim=2 * HIDDEN, encoder_hidden_size=4, downsampling_ratios=[2, 4]),
    "neucodec": dict(quantization_dim=2 * HIDDEN, encoder_hidden_size=4, downsampling_ratios=[2, 4]),
    # X-Codec concatenates HuBERT's frames with the acoustic encoder's (hop 320): the tiny speech convolutions' total
    # stride 320 as well (the generic SPEECH_CONV's is 20); codes as wide as the two concatenated (2 x 32).
    "xcodec": dict(semantic_model_config=dict(conv_stride=[16, 20], conv_kernel=[16, 20]), codebook_dim=2 * HIDDEN,
                   acoustic_model_config=dict(encoder_hidden_size=8)),  # (its DAC encoder: 3M parameters at 32)
    # Janus's VQ-GAN: the token grid the 32 x 32 image makes through 4 halvings (2 x 2, the defaults' 32 for 512), and
    # 32-128 channels (not 128-512).
    "janus_vqgan": dict(num_patches=IMAGE // 16, base_channels=HIDDEN, latent_channels=HIDDEN, num_embeddings=64,
                        num_res_blocks=1, image_token_embed_dim=HIDDEN),
    # FastSpeech 2 + HiFi-GAN: convolution widths no generic key names (predictors, postnet, conformer feed-forward:
    # 256-1536; the vocoder's first 512 channels), and the conformers' settings the config serialises as derived dicts
    # (4 layers, 1536 wide, which override the shrunk keys): 21M parameters.
    "fastspeech2_conformer_with_hifigan": dict(
        vocoder_config=dict(upsample_initial_channel=HIDDEN),
        model_config=dict(speech_decoder_postnet_units=HIDDEN, duration_predictor_channels=HIDDEN,
                          energy_predictor_channels=HIDDEN, pitch_predictor_channels=HIDDEN,
                          encoder_config=dict(layers=LAYERS, linear_units=FFN),
                          decoder_config=dict(layers=LAYERS, linear_units=FFN))),
    "muse_glimmer_assistant": dict(block_size=4),  # (tokens drafted per block: 16)
    # Qwen4-Exp builds its QSA token indexer on full-attention layers whatever the config, which leaves it unset: one
    # key head, blocks of 2 keys, 4 tokens selected (short of the 7, so the selection matters); the hyper-connection
    # mixer's rank 32, not 320.
    "qwen4_exp_text": QWEN4_TEXT,
    "qwen4_exp": dict(text_config=QWEN4_TEXT),
    # No MLP layer pattern in the defaults (indexed per layer): a dense layer and an MoE one.
    "deepseek_ocr2_text": dict(mlp_layer_types=["dense", "sparse"]),
    "deepseek_ocr2": dict(text_config=dict(mlp_layer_types=["dense", "sparse"]),  # (and SAM's neck: 896 wide)
                          vision_config=dict(sam_config=dict(downsample_channels=[HIDDEN, HIDDEN]))),
    # No cache: RWKV writes its recurrent state in place (backward then fails); BLT's cache needs
    # num_hidden_layers, which BltConfig lacks.
    "rwkv": dict(use_cache=False),
    "blt": dict(use_cache=False, encoder_hash_byte_group_vocab=VOCAB),  # (hash embeddings: 6 x 500002 rows)
    # EfficientNet's convolutions at tiny widths shrink activations ~0.02 x sqrt(fan-in) each (eval batch norm does not
    # renormalise): at the default init the pooled image vanishes to 1e-30 and its normalised embedding is inf.
    "align": dict(vision_config=dict(initializer_range=0.4)),
}


# Types whose eager attention path is broken in transformers itself (run with SDPA instead): Nemotron ASR
# streaming fills -inf where `attention_mask.logical_not()`, but the eager path gets an additive float mask (0 where
# attended), so every score is masked and softmax makes NaN.
ATTN_IMPLEMENTATION = {"nemotron_asr_streaming": "sdpa", "nemotron_asr_streaming_encoder": "sdpa",
                       "nemotron3_5_asr": "sdpa"}
