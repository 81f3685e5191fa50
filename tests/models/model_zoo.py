"""The architectures of the model coverage suite: one table of tiny, offline Hugging Face models.

Each entry names the architecture, its family, the transformers model class, a config factory (a tiny config
built directly: no download, no tokenizer) and the kind of input it takes (synthetic ids, pixels, audio).
`quick` marks the representative subset that `make test` runs (about one per family); `make test-models`
runs every entry (TORCH_TPU_MODELS=all). `xfail` holds the reason an architecture cannot pass yet.
"""
import dataclasses
from typing import Callable, Optional

import torch
import transformers

VOCAB = 99
HIDDEN = 32
HEADS = 4
FFN = 37
LAYERS = 2
BATCH = 2
SEQ = 7
IMAGE = 32
AUDIO_SAMPLES = 800


@dataclasses.dataclass(frozen=True)
class Arch:
    name: str
    family: str  # decoder, moe, encoder, encoder-decoder, vision, audio, multimodal
    model_class: str  # attribute of transformers
    config: Callable[[], "transformers.PretrainedConfig"]
    inputs: str  # key of INPUTS
    quick: bool = False
    xfail: Optional[str] = None
    output: str = "logits"  # the output compared as "forward"
    # Why the model computes NaN/Inf from finite inputs on purpose (CPU does the same), which debug mode
    # would report: the test runs it inside conftest.nonfinite_ok().
    nonfinite: Optional[str] = None

    @property
    def generates(self):
        return self.inputs == "causal"

    def build(self):
        return getattr(transformers, self.model_class)(self.config())


def _cfg(name, **kw):
    def make():
        return getattr(transformers, name)(**kw)
    return make


TEXT = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=FFN, max_position_embeddings=64)
LLAMA_LIKE = dict(TEXT, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
# CPU's grouped_mm kernel (the reference's default experts implementation) needs 16-byte strides.
MOE_LM = dict(LLAMA_LIKE, intermediate_size=40)
MOE = dict(num_local_experts=4, num_experts_per_tok=2)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
               encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
               decoder_ffn_dim=FFN, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
               decoder_start_token_id=2)
T5 = dict(vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=FFN, num_layers=LAYERS, num_decoder_layers=LAYERS,
          num_heads=HEADS, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
VIT = dict(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
           num_attention_heads=HEADS, intermediate_size=FFN, num_labels=3)
STAGES = dict(num_channels=3, num_labels=3)
SPEECH = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              intermediate_size=FFN, conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, pad_token_id=0,
              ctc_loss_reduction="mean", mask_time_prob=0.0)
CLIP_TEXT = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                 intermediate_size=FFN, max_position_embeddings=64)
CLIP_VISION = dict(image_size=IMAGE, patch_size=8, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                   num_attention_heads=HEADS, intermediate_size=FFN)


def _clip(name, text_name, vision_name, **kw):
    def make():
        return getattr(transformers, name)(text_config=dict(CLIP_TEXT), vision_config=dict(CLIP_VISION), **kw)
    return make


T5_LOG0 = "relative position buckets take log(0) = -inf for distance 0, then select the exact bucket (T5's scheme)"

ARCHS = [
    # ---- decoder LMs -------------------------------------------------------------------------------
    Arch("gpt2", "decoder", "GPT2LMHeadModel",
         _cfg("GPT2Config", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=64,
              pad_token_id=0), "causal"),
    Arch("llama", "decoder", "LlamaForCausalLM", _cfg("LlamaConfig", **LLAMA_LIKE), "causal", quick=True),
    Arch("mistral", "decoder", "MistralForCausalLM", _cfg("MistralConfig", **LLAMA_LIKE), "causal"),
    Arch("qwen2", "decoder", "Qwen2ForCausalLM", _cfg("Qwen2Config", **LLAMA_LIKE), "causal"),
    Arch("qwen3", "decoder", "Qwen3ForCausalLM", _cfg("Qwen3Config", **LLAMA_LIKE, head_dim=8), "causal"),
    Arch("gemma", "decoder", "GemmaForCausalLM", _cfg("GemmaConfig", **LLAMA_LIKE, head_dim=8), "causal"),
    Arch("gemma2", "decoder", "Gemma2ForCausalLM", _cfg("Gemma2Config", **LLAMA_LIKE, head_dim=8), "causal"),
    Arch("gemma3_text", "decoder", "Gemma3ForCausalLM", _cfg("Gemma3TextConfig", **LLAMA_LIKE, head_dim=8),
         "causal"),
    Arch("phi", "decoder", "PhiForCausalLM", _cfg("PhiConfig", **LLAMA_LIKE), "causal"),
    Arch("phi3", "decoder", "Phi3ForCausalLM", _cfg("Phi3Config", **LLAMA_LIKE), "causal"),
    Arch("olmo", "decoder", "OlmoForCausalLM", _cfg("OlmoConfig", **LLAMA_LIKE), "causal"),
    Arch("olmo2", "decoder", "Olmo2ForCausalLM", _cfg("Olmo2Config", **LLAMA_LIKE), "causal"),
    Arch("granite", "decoder", "GraniteForCausalLM", _cfg("GraniteConfig", **LLAMA_LIKE), "causal"),
    Arch("cohere", "decoder", "CohereForCausalLM", _cfg("CohereConfig", **LLAMA_LIKE), "causal"),
    Arch("stablelm", "decoder", "StableLmForCausalLM", _cfg("StableLmConfig", **LLAMA_LIKE), "causal"),
    Arch("starcoder2", "decoder", "Starcoder2ForCausalLM", _cfg("Starcoder2Config", **LLAMA_LIKE), "causal"),
    Arch("glm", "decoder", "GlmForCausalLM", _cfg("GlmConfig", **LLAMA_LIKE, head_dim=8), "causal"),
    Arch("persimmon", "decoder", "PersimmonForCausalLM",
         _cfg("PersimmonConfig", **{k: v for k, v in LLAMA_LIKE.items() if k != "num_key_value_heads"}), "causal"),
    Arch("gpt_neo", "decoder", "GPTNeoForCausalLM",
         _cfg("GPTNeoConfig", vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=LAYERS, num_heads=HEADS,
              attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64,
              intermediate_size=FFN, pad_token_id=0), "causal",
         nonfinite="masked scores (finfo.min) plus the additive mask (finfo.min) overflow to -inf; softmax gives 0"),
    Arch("gptj", "decoder", "GPTJForCausalLM",
         _cfg("GPTJConfig", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, rotary_dim=4,
              n_positions=64, pad_token_id=0), "causal"),
    Arch("gpt_neox", "decoder", "GPTNeoXForCausalLM", _cfg("GPTNeoXConfig", **TEXT, pad_token_id=0), "causal"),
    Arch("codegen", "decoder", "CodeGenForCausalLM",
         _cfg("CodeGenConfig", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, rotary_dim=4,
              n_positions=64, n_ctx=64, pad_token_id=0), "causal"),
    Arch("gpt_bigcode", "decoder", "GPTBigCodeForCausalLM",
         _cfg("GPTBigCodeConfig", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=64,
              pad_token_id=0), "causal"),
    Arch("opt", "decoder", "OPTForCausalLM",
         _cfg("OPTConfig", vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, ffn_dim=FFN, word_embed_proj_dim=HIDDEN, max_position_embeddings=64,
              pad_token_id=1), "causal"),
    Arch("bloom", "decoder", "BloomForCausalLM",
         _cfg("BloomConfig", vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, pad_token_id=0),
         "causal"),
    Arch("falcon", "decoder", "FalconForCausalLM",
         _cfg("FalconConfig", vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, pad_token_id=0), "causal"),
    Arch("mpt", "decoder", "MptForCausalLM",
         _cfg("MptConfig", vocab_size=VOCAB, d_model=HIDDEN, n_layers=LAYERS, n_heads=HEADS, max_seq_len=64,
              pad_token_id=0), "causal"),
    Arch("biogpt", "decoder", "BioGptForCausalLM", _cfg("BioGptConfig", **TEXT, pad_token_id=1), "causal"),
    Arch("ctrl", "decoder", "CTRLLMHeadModel",
         _cfg("CTRLConfig", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, dff=FFN,
              n_positions=64, pad_token_id=0), "causal"),
    # ---- mixture-of-experts decoders (default experts implementation) -------------------------------
    Arch("mixtral", "moe", "MixtralForCausalLM", _cfg("MixtralConfig", **MOE_LM, **MOE), "causal", quick=True),
    Arch("qwen2_moe", "moe", "Qwen2MoeForCausalLM",
         _cfg("Qwen2MoeConfig", **MOE_LM, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
              shared_expert_intermediate_size=24), "causal"),
    Arch("qwen3_moe", "moe", "Qwen3MoeForCausalLM",
         _cfg("Qwen3MoeConfig", **MOE_LM, head_dim=8, num_experts=4, num_experts_per_tok=2,
              moe_intermediate_size=16), "causal"),
    Arch("olmoe", "moe", "OlmoeForCausalLM",
         _cfg("OlmoeConfig", **MOE_LM, num_experts=4, num_experts_per_tok=2), "causal"),
    Arch("granitemoe", "moe", "GraniteMoeForCausalLM",
         _cfg("GraniteMoeConfig", **MOE_LM, **MOE), "causal"),
    # ---- encoders (masked LM) -----------------------------------------------------------------------
    Arch("bert", "encoder", "BertForMaskedLM", _cfg("BertConfig", **TEXT), "masked", quick=True),
    Arch("roberta", "encoder", "RobertaForMaskedLM", _cfg("RobertaConfig", **TEXT, pad_token_id=1), "masked"),
    Arch("xlm_roberta", "encoder", "XLMRobertaForMaskedLM", _cfg("XLMRobertaConfig", **TEXT, pad_token_id=1),
         "masked"),
    Arch("camembert", "encoder", "CamembertForMaskedLM", _cfg("CamembertConfig", **TEXT, pad_token_id=1),
         "masked"),
    Arch("data2vec_text", "encoder", "Data2VecTextForMaskedLM",
         _cfg("Data2VecTextConfig", **TEXT, pad_token_id=1), "masked"),
    Arch("deberta", "encoder", "DebertaForMaskedLM",
         _cfg("DebertaConfig", **TEXT, relative_attention=True, pos_att_type=["p2c", "c2p"]), "masked"),
    Arch("deberta_v2", "encoder", "DebertaV2ForMaskedLM",
         _cfg("DebertaV2Config", **TEXT, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8),
         "masked"),
    Arch("albert", "encoder", "AlbertForMaskedLM", _cfg("AlbertConfig", **TEXT, embedding_size=16), "masked"),
    Arch("electra", "encoder", "ElectraForMaskedLM", _cfg("ElectraConfig", **TEXT, embedding_size=16), "masked"),
    Arch("distilbert", "encoder", "DistilBertForMaskedLM",
         _cfg("DistilBertConfig", vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
              max_position_embeddings=64), "masked"),
    Arch("mpnet", "encoder", "MPNetForMaskedLM", _cfg("MPNetConfig", **TEXT), "masked", nonfinite=T5_LOG0),
    Arch("convbert", "encoder", "ConvBertForMaskedLM", _cfg("ConvBertConfig", **TEXT, embedding_size=HIDDEN),
         "masked"),
    Arch("megatron_bert", "encoder", "MegatronBertForMaskedLM", _cfg("MegatronBertConfig", **TEXT), "masked"),
    Arch("roformer", "encoder", "RoFormerForMaskedLM", _cfg("RoFormerConfig", **TEXT, embedding_size=HIDDEN),
         "masked"),
    Arch("ernie", "encoder", "ErnieForMaskedLM", _cfg("ErnieConfig", **TEXT), "masked"),
    Arch("mobilebert", "encoder", "MobileBertForMaskedLM",
         _cfg("MobileBertConfig", **TEXT, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
              num_feedforward_networks=2), "masked"),
    Arch("modernbert", "encoder", "ModernBertForMaskedLM",
         _cfg("ModernBertConfig", **TEXT, pad_token_id=0, global_attn_every_n_layers=2, local_attention=4),
         "masked"),
    Arch("esm", "encoder", "EsmForMaskedLM", _cfg("EsmConfig", **TEXT, pad_token_id=1, mask_token_id=3),
         "masked"),
    Arch("big_bird", "encoder", "BigBirdForMaskedLM",
         _cfg("BigBirdConfig", **TEXT, attention_type="original_full"), "masked"),
    Arch("rembert", "encoder", "RemBertForMaskedLM",
         _cfg("RemBertConfig", **TEXT, input_embedding_size=16, output_embedding_size=16), "masked"),
    Arch("funnel", "encoder", "FunnelForMaskedLM",
         _cfg("FunnelConfig", vocab_size=VOCAB, block_sizes=[1, 1], num_decoder_layers=1, d_model=HIDDEN,
              n_head=HEADS, d_head=8, d_inner=FFN), "masked"),
    Arch("squeezebert", "encoder", "SqueezeBertForMaskedLM",
         _cfg("SqueezeBertConfig", **dict(TEXT, intermediate_size=40), embedding_size=HIDDEN), "masked"),
    Arch("nystromformer", "encoder", "NystromformerForMaskedLM",
         _cfg("NystromformerConfig", **TEXT, num_landmarks=SEQ, segment_means_seq_len=SEQ), "masked"),
    Arch("xlm", "encoder", "XLMWithLMHeadModel",
         _cfg("XLMConfig", vocab_size=VOCAB, emb_dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
              max_position_embeddings=64), "masked"),
    Arch("fnet", "encoder", "FNetForMaskedLM", _cfg("FNetConfig", **{k: v for k, v in TEXT.items()
                                                                  if k != "num_attention_heads"}),
         "masked"),
    # ---- encoder-decoders (seq2seq LM) --------------------------------------------------------------
    Arch("t5", "encoder-decoder", "T5ForConditionalGeneration", _cfg("T5Config", **T5), "seq2seq", quick=True,
         nonfinite=T5_LOG0),
    Arch("mt5", "encoder-decoder", "MT5ForConditionalGeneration", _cfg("MT5Config", **T5), "seq2seq",
         nonfinite=T5_LOG0),
    Arch("umt5", "encoder-decoder", "UMT5ForConditionalGeneration", _cfg("UMT5Config", **T5), "seq2seq",
         nonfinite=T5_LOG0),
    Arch("longt5", "encoder-decoder", "LongT5ForConditionalGeneration",
         _cfg("LongT5Config", **T5, local_radius=2), "seq2seq", nonfinite=T5_LOG0),
    Arch("switch_transformers", "moe", "SwitchTransformersForConditionalGeneration",
         _cfg("SwitchTransformersConfig", **T5, num_experts=4, num_sparse_encoder_layers=1,
              num_sparse_decoder_layers=1, expert_capacity=8), "seq2seq", nonfinite=T5_LOG0),
    Arch("bart", "encoder-decoder", "BartForConditionalGeneration", _cfg("BartConfig", **SEQ2SEQ), "seq2seq"),
    Arch("mbart", "encoder-decoder", "MBartForConditionalGeneration", _cfg("MBartConfig", **SEQ2SEQ), "seq2seq"),
    Arch("plbart", "encoder-decoder", "PLBartForConditionalGeneration", _cfg("PLBartConfig", **SEQ2SEQ),
         "seq2seq"),
    Arch("pegasus", "encoder-decoder", "PegasusForConditionalGeneration", _cfg("PegasusConfig", **SEQ2SEQ),
         "seq2seq"),
    Arch("marian", "encoder-decoder", "MarianMTModel",
         _cfg("MarianConfig", **dict(SEQ2SEQ, pad_token_id=VOCAB - 1, decoder_start_token_id=VOCAB - 1)),
         "seq2seq"),
    Arch("blenderbot", "encoder-decoder", "BlenderbotForConditionalGeneration",
         _cfg("BlenderbotConfig", **SEQ2SEQ), "seq2seq"),
    Arch("blenderbot_small", "encoder-decoder", "BlenderbotSmallForConditionalGeneration",
         _cfg("BlenderbotSmallConfig", **SEQ2SEQ), "seq2seq"),
    Arch("m2m_100", "encoder-decoder", "M2M100ForConditionalGeneration", _cfg("M2M100Config", **SEQ2SEQ),
         "seq2seq"),
    Arch("led", "encoder-decoder", "LEDForConditionalGeneration",
         _cfg("LEDConfig", **{k: v for k, v in SEQ2SEQ.items() if k != "max_position_embeddings"},
              max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, attention_window=4),
         "seq2seq"),
    Arch("prophetnet", "encoder-decoder", "ProphetNetForConditionalGeneration",
         _cfg("ProphetNetConfig", vocab_size=VOCAB, hidden_size=HIDDEN, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
              num_encoder_layers=LAYERS, num_decoder_layers=LAYERS, num_encoder_attention_heads=HEADS,
              num_decoder_attention_heads=HEADS, max_position_embeddings=64, ngram=2, num_buckets=8,
              relative_max_distance=16, pad_token_id=0, decoder_start_token_id=0), "seq2seq",
         nonfinite=T5_LOG0),
    # ---- vision (image classification) --------------------------------------------------------------
    Arch("vit", "vision", "ViTForImageClassification", _cfg("ViTConfig", **VIT), "image", quick=True),
    Arch("deit", "vision", "DeiTForImageClassification", _cfg("DeiTConfig", **VIT), "image"),
    Arch("beit", "vision", "BeitForImageClassification",
         _cfg("BeitConfig", **VIT, use_relative_position_bias=True), "image"),
    Arch("dinov2", "vision", "Dinov2ForImageClassification", _cfg("Dinov2Config", **VIT), "image"),
    Arch("convnext", "vision", "ConvNextForImageClassification",
         _cfg("ConvNextConfig", **STAGES, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2), "image"),
    Arch("convnextv2", "vision", "ConvNextV2ForImageClassification",
         _cfg("ConvNextV2Config", **STAGES, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2), "image"),
    Arch("resnet", "vision", "ResNetForImageClassification",
         _cfg("ResNetConfig", **STAGES, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
              layer_type="basic"), "image"),
    Arch("regnet", "vision", "RegNetForImageClassification",
         _cfg("RegNetConfig", **STAGES, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=4),
         "image"),
    Arch("bit", "vision", "BitForImageClassification",
         _cfg("BitConfig", **STAGES, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_groups=2),
         "image"),
    Arch("swin", "vision", "SwinForImageClassification",
         _cfg("SwinConfig", image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
              window_size=4, **STAGES), "image"),
    Arch("swinv2", "vision", "Swinv2ForImageClassification",
         _cfg("Swinv2Config", image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
              window_size=4, **STAGES), "image"),
    Arch("mobilenet_v1", "vision", "MobileNetV1ForImageClassification",
         _cfg("MobileNetV1Config", image_size=IMAGE, depth_multiplier=0.25, **STAGES), "image"),
    Arch("mobilenet_v2", "vision", "MobileNetV2ForImageClassification",
         _cfg("MobileNetV2Config", image_size=IMAGE, depth_multiplier=0.25, **STAGES), "image"),
    Arch("levit", "vision", "LevitForImageClassification",
         _cfg("LevitConfig", image_size=IMAGE, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3],
              depth=[1, 1, 1], key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2], **STAGES),
         "image"),
    Arch("poolformer", "vision", "PoolFormerForImageClassification",
         _cfg("PoolFormerConfig", hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], **STAGES), "image"),
    Arch("segformer", "vision", "SegformerForImageClassification",
         _cfg("SegformerConfig", hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 2, 2],
              decoder_hidden_size=16, **STAGES), "image"),
    Arch("pvt", "vision", "PvtForImageClassification",
         _cfg("PvtConfig", image_size=IMAGE, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1],
              num_attention_heads=[1, 2, 2, 2], **STAGES), "image"),
    Arch("mobilevit", "vision", "MobileViTForImageClassification",
         _cfg("MobileViTConfig", image_size=IMAGE, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24,
              32, 64], num_attention_heads=2, **STAGES), "image"),
    # ---- audio --------------------------------------------------------------------------------------
    Arch("wav2vec2", "audio", "Wav2Vec2ForCTC", _cfg("Wav2Vec2Config", **SPEECH), "ctc"),
    Arch("hubert", "audio", "HubertForCTC", _cfg("HubertConfig", **SPEECH), "ctc"),
    Arch("wavlm", "audio", "WavLMForCTC", _cfg("WavLMConfig", **SPEECH, num_buckets=16, max_bucket_distance=32),
         "ctc", nonfinite=T5_LOG0),
    Arch("data2vec_audio", "audio", "Data2VecAudioForCTC",
         _cfg("Data2VecAudioConfig", **{k: v for k, v in SPEECH.items() if k != "num_conv_pos_embeddings"},
              num_conv_pos_embeddings=3, conv_pos_kernel_size=3), "ctc"),
    Arch("sew", "audio", "SEWForCTC", _cfg("SEWConfig", **SPEECH, squeeze_factor=2), "ctc"),
    Arch("unispeech", "audio", "UniSpeechForCTC", _cfg("UniSpeechConfig", **SPEECH), "ctc"),
    Arch("whisper", "audio", "WhisperForConditionalGeneration",
         _cfg("WhisperConfig", vocab_size=VOCAB, num_mel_bins=8, d_model=HIDDEN, encoder_layers=LAYERS,
              decoder_layers=LAYERS, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
              encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_source_positions=8, max_target_positions=32,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1), "whisper", quick=True),
    Arch("speech_to_text", "audio", "Speech2TextForConditionalGeneration",
         _cfg("Speech2TextConfig", vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
              encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
              decoder_ffn_dim=FFN, input_feat_per_channel=8, input_channels=1, num_conv_layers=2,
              conv_channels=16, conv_kernel_sizes=(5, 5), max_source_positions=64, max_target_positions=64,
              pad_token_id=1, decoder_start_token_id=2), "speech2text"),
    Arch("audio_spectrogram_transformer", "audio", "ASTForAudioClassification",
         _cfg("ASTConfig", hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              intermediate_size=FFN, patch_size=4, frequency_stride=4, time_stride=4, max_length=16,
              num_mel_bins=8, num_labels=3), "ast"),
    # ---- multimodal ---------------------------------------------------------------------------------
    Arch("clip", "multimodal", "CLIPModel", _clip("CLIPConfig", "CLIPTextConfig", "CLIPVisionConfig"), "clip",
         quick=True, output="logits_per_image"),
    Arch("siglip", "multimodal", "SiglipModel", _clip("SiglipConfig", "SiglipTextConfig", "SiglipVisionConfig"),
         "clip", output="logits_per_image"),
    Arch("chinese_clip", "multimodal", "ChineseCLIPModel",
         _clip("ChineseCLIPConfig", "ChineseCLIPTextConfig", "ChineseCLIPVisionConfig"), "clip",
         output="logits_per_image"),
    Arch("altclip", "multimodal", "AltCLIPModel",
         _clip("AltCLIPConfig", "AltCLIPTextConfig", "AltCLIPVisionConfig"), "clip", output="logits_per_image"),
    Arch("blip", "multimodal", "BlipForImageTextRetrieval",
         _clip("BlipConfig", "BlipTextConfig", "BlipVisionConfig"), "blip", output="itm_score"),
]

BY_NAME = {a.name: a for a in ARCHS}


# ---- synthetic inputs (CPU tensors; seeded by the architecture's name) --------------------------------

def _ids(g, shape, low=3, high=VOCAB):
    return torch.randint(low, high, shape, generator=g)


def _causal(cfg, g):
    ids = _ids(g, (BATCH, SEQ))
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone())


def _masked(cfg, g):
    ids = _ids(g, (BATCH, SEQ))
    labels = torch.full_like(ids, -100)
    labels[:, 1::2] = ids[:, 1::2]
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)


def _seq2seq(cfg, g):
    ids = _ids(g, (BATCH, SEQ))
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=_ids(g, (BATCH, 5)))


def _image(cfg, g):
    return dict(pixel_values=torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g), labels=torch.randint(0, 3, (BATCH,),
                                                                                                     generator=g))


def _ctc(cfg, g):
    return dict(input_values=torch.randn(BATCH, AUDIO_SAMPLES, generator=g), labels=_ids(g, (BATCH, 4)))


def _whisper(cfg, g):
    # input_features: log-mel frames (the feature extractor's job, not the model's): 2 x max_source_positions.
    return dict(input_features=torch.randn(BATCH, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g),
                labels=_ids(g, (BATCH, 5)))


def _speech2text(cfg, g):
    return dict(input_features=torch.randn(BATCH, 20, cfg.input_feat_per_channel, generator=g),
                attention_mask=torch.ones(BATCH, 20, dtype=torch.long), labels=_ids(g, (BATCH, 5)))


def _ast(cfg, g):
    return dict(input_values=torch.randn(BATCH, cfg.max_length, cfg.num_mel_bins, generator=g),
                labels=torch.randint(0, 3, (BATCH,), generator=g))


def _clip_inputs(cfg, g):
    ids = _ids(g, (BATCH, SEQ))
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                pixel_values=torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g), return_loss=True)


def _blip(cfg, g):
    ids = _ids(g, (BATCH, SEQ))
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                pixel_values=torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g))


INPUTS = dict(causal=_causal, masked=_masked, seq2seq=_seq2seq, image=_image, ctc=_ctc, whisper=_whisper,
              speech2text=_speech2text, ast=_ast, clip=_clip_inputs, blip=_blip)


def make_inputs(arch, cfg):
    g = torch.Generator().manual_seed(sum(map(ord, arch.name)))
    return INPUTS[arch.inputs](cfg, g)

# (name, mode) -> {stage: dict(ok, err, tol, why)}: filled by test_models_hf.py, read by conftest.py.
RESULTS = {}
