"""transformers.pipeline(task, ..., device="tpu") for the common tasks, against the same pipeline on CPU.

Every model is tiny (hidden 32, 2 layers), built on CPU from a config under torch.manual_seed, with a tokenizer,
feature extractor or image processor made locally (no download). Each case runs its pipeline three times: on CPU
in float32, on CPU in float64 (the model `.double()`) and on tpu. Text, token ids and labels must equal CPU's;
scores and features must be within 1e-5 (+1e-5 relative) of float64 plus 4x CPU float32's own largest error on
that output (tests/models/test_models_hf.py's rule). A label or token that tpu could only get wrong at a near tie
is not a test of tpu, so each case asserts that its float64 reference is clear: every decision it shows (greedy
token, CTC frame, token label, ranking) wins by at least MARGIN.

transformers 5.23 removed the summarization, translation and question-answering pipelines; the encoder-decoder
generation path is covered by Whisper's automatic-speech-recognition and extractive QA by
document-question-answering (LayoutLM on given word boxes, no OCR).
"""
import copy
import dataclasses
import json
from typing import Any, Callable

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, processors

transformers.logging.set_verbosity_error()

RTOL, ATOL = 1e-5, 1e-5
CPU_ERROR_FACTOR = 4
MARGIN = 10 * ATOL  # the least float64 lead of a decision (logit or probability) the references must show
HIDDEN, LAYERS, HEADS, FFN = 32, 2, 4, 37

WORDS = ("the a cat dog sat on mat red blue green big small ran jumped over under house tree paris london john "
         "mary is was and this in of to it who where what").split()
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# ---- local tokenizers and processors -----------------------------------------------------------------------------

def bert_tokenizer():
    vocab = {w: i for i, w in enumerate(BERT_SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=64)


def lm_tokenizer():
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<s>", "</s>"] + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>",
        model_max_length=64)


CTC_VOCAB = ["<pad>", "<s>", "</s>", "<unk>", "|"] + list("abcdefghijklmnopqrstuvwxyz'")


def ctc_tokenizer(tmp):
    path = tmp / "vocab.json"
    path.write_text(json.dumps({c: i for i, c in enumerate(CTC_VOCAB)}))
    return transformers.Wav2Vec2CTCTokenizer(str(path), unk_token="<unk>", pad_token="<pad>",
                                             word_delimiter_token="|")


WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]


def whisper_tokenizer():
    # Byte-level BPE: every letter, "Ġ" (a space) and a few merges; Whisper's special tokens after them.
    letters = list("abcdefghijklmnopqrstuvwxyz") + ["Ġ"]
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("a", "t"), ("Ġ", "c"), ("Ġc", "at")]
    vocab = {t: i for i, t in enumerate(letters + ["".join(m) for m in merges])}
    tok = transformers.WhisperTokenizer(vocab=vocab, merges=merges)
    tok.add_special_tokens({"additional_special_tokens": WHISPER_SPECIALS[1:]})
    return tok


# ---- comparison ------------------------------------------------------------------------------------------------

def _leaves(out, path="out"):
    """(path, value) of every leaf: floats (and float arrays) to compare within tolerance, the rest exactly."""
    if isinstance(out, dict):
        for k in sorted(out):
            yield from _leaves(out[k], f"{path}[{k!r}]")
    elif isinstance(out, (list, tuple)):
        yield path + ".len", len(out)
        for i, v in enumerate(out):
            yield from _leaves(v, f"{path}[{i}]")
    elif isinstance(out, torch.Tensor):
        yield path, out.detach().cpu()
    elif isinstance(out, np.ndarray):
        yield path, torch.from_numpy(out)
    elif isinstance(out, (np.floating, np.integer)):
        yield path, out.item()
    else:
        yield path, out


def _is_float(v):
    return isinstance(v, float) or (isinstance(v, torch.Tensor) and v.is_floating_point())


def assert_matches_cpu(tpu, cpu, exact):
    """Exact leaves equal CPU's; float leaves within RTOL|exact| + ATOL + 4x CPU float32's largest error."""
    t, c, e = (list(_leaves(o)) for o in (tpu, cpu, exact))
    assert [p for p, _ in t] == [p for p, _ in c], "tpu's output has another structure than CPU's"
    floats = []
    for (path, a), (_, b), (_, r) in zip(t, c, e):
        if _is_float(b):
            floats.append((path, torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                           torch.as_tensor(r, dtype=torch.float64)))
        elif isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor) and torch.equal(a, b), f"{path}: tpu {a} != CPU {b}"
        else:
            assert a == b, f"{path}: tpu {a!r} != CPU {b!r}"
    if not floats:
        return
    cpu_err = max((b - r).abs().max().item() for _, _, b, r in floats)
    for path, a, _, r in floats:
        assert a.shape == r.shape, f"{path}: shape {tuple(a.shape)} != {tuple(r.shape)}"
        tol = CPU_ERROR_FACTOR * cpu_err + ATOL + RTOL * r.abs()
        err = (a - r).abs()
        bad = err > tol
        assert not bad.any(), (f"{path}: tpu differs from float64 by {err.max().item():.3g} "
                               f"(tolerance {tol.min().item():.3g}, CPU float32's error {cpu_err:.3g})")


def assert_clear(gaps, what):
    """The float64 reference's decisions (lead of the winner over the runner-up, one per decision) are clear."""
    gaps = torch.as_tensor(gaps, dtype=torch.float64).reshape(-1)
    worst = gaps.min().item()
    assert worst > MARGIN, f"{what}: the float64 reference has a near tie (lead {worst:.3g}); choose another input"


def top2_gaps(logits):
    top = logits.double().topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def ranked_gaps(scores):
    s = torch.tensor(scores, dtype=torch.float64)
    return s[:-1] - s[1:]


# ---- cases -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    task: str
    model: Any  # the CPU float32 model (kept unchanged)
    pipe_kw: dict
    call: Callable  # call(pipe) -> output
    clear: Callable  # clear(model64, pipe64) -> gaps of the float64 reference's decisions
    cpu: Any = None
    exact: Any = None
    tpu_pipe: Any = None

    def reference(self):
        cpu = transformers.pipeline(self.task, model=copy.deepcopy(self.model), device="cpu", **self.pipe_kw)
        self.cpu = self.call(cpu)
        m64 = copy.deepcopy(self.model).double()
        p64 = transformers.pipeline(self.task, model=m64, device="cpu", **self.pipe_kw)
        self.exact = self.call(p64)
        assert_clear(self.clear(m64, p64), self.task)
        self.tpu_pipe = transformers.pipeline(self.task, model=copy.deepcopy(self.model), device="tpu",
                                              **self.pipe_kw)
        assert self.tpu_pipe.model.device.type == "tpu"
        return self


def _seeded(cls, cfg, seed=0):
    torch.manual_seed(seed)
    return cls(cfg).eval()


BERT = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
            max_position_embeddings=64, initializer_range=0.2)


def _bert_cfg(tok, **kw):
    return transformers.BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **BERT, **kw)


def _labels(names):
    return dict(id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})


# The pipeline decodes the new words apart and appends them to the prompt: WordLevel tokens carry no leading space.
TEXT_GEN_PROMPTS = ["the cat sat on the ", "john ran to paris and "]
NEW_TOKENS = 6


def text_generation():
    tok = lm_tokenizer()
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, num_key_value_heads=2, intermediate_size=FFN,
                                   max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                                   bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                   initializer_range=0.2)
    model = _seeded(transformers.LlamaForCausalLM, cfg)
    gen = dict(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)

    def call(pipe):
        return [pipe(p, return_tensors=True, **gen) for p in TEXT_GEN_PROMPTS] + \
               [pipe(p, **gen) for p in TEXT_GEN_PROMPTS]

    def clear(m64, _):
        gaps = []
        for p in TEXT_GEN_PROMPTS:
            ids = tok(p, return_tensors="pt")
            with torch.no_grad():
                out = m64.generate(**ids, **gen, output_logits=True, return_dict_in_generate=True)
            gaps += [top2_gaps(l) for l in out.logits]
        return torch.cat(gaps)

    return Case("text-generation", model, dict(tokenizer=tok), call, clear)


FILL_MASK_TEXT = ["the cat [MASK] on the mat", "[MASK] dog jumped over the red house"]


def fill_mask():
    tok = bert_tokenizer()
    model = _seeded(transformers.BertForMaskedLM, _bert_cfg(tok))
    top_k = 4

    def call(pipe):
        return pipe(FILL_MASK_TEXT, top_k=top_k)

    def clear(_, p64):
        return torch.cat([ranked_gaps([r["score"] for r in rs]) for rs in p64(FILL_MASK_TEXT, top_k=top_k + 1)])

    return Case("fill-mask", model, dict(tokenizer=tok), call, clear)


NER_TEXT = ["john and mary ran to paris", "the big dog sat under the tree in london"]


def token_classification():
    tok = bert_tokenizer()
    model = _seeded(transformers.BertForTokenClassification,
                    _bert_cfg(tok, **_labels(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])))

    def call(pipe):
        return [pipe(NER_TEXT), pipe(NER_TEXT, aggregation_strategy="simple")]

    def clear(m64, _):
        ids = tok(NER_TEXT, return_tensors="pt", padding=True)
        with torch.no_grad():
            logits = m64(**ids).logits
        return top2_gaps(logits)[ids["attention_mask"].bool()]

    return Case("token-classification", model, dict(tokenizer=tok), call, clear)


SEQ_TEXT = ["the cat sat on the mat", "john was in london", "a big red house"]


def text_classification():
    tok = bert_tokenizer()
    model = _seeded(transformers.BertForSequenceClassification,
                    _bert_cfg(tok, **_labels(["negative", "neutral", "positive"])))

    def call(pipe):
        return pipe(SEQ_TEXT, top_k=None)

    def clear(_, p64):
        return torch.cat([ranked_gaps([r["score"] for r in rs]) for rs in p64(SEQ_TEXT, top_k=None)])

    return Case("text-classification", model, dict(tokenizer=tok), call, clear)


ZERO_SHOT_TEXT = ["the cat sat on the mat", "mary ran to the house"]
ZERO_SHOT_LABELS = ["cat", "dog", "house", "tree"]


def zero_shot_classification():
    tok = bert_tokenizer()
    model = _seeded(transformers.BertForSequenceClassification,
                    _bert_cfg(tok, **_labels(["contradiction", "neutral", "entailment"])))
    kw = dict(candidate_labels=ZERO_SHOT_LABELS, hypothesis_template="this is a {}")

    def call(pipe):
        return [pipe(ZERO_SHOT_TEXT, **kw), pipe(ZERO_SHOT_TEXT, multi_label=True, **kw)]

    def clear(_, p64):
        return torch.cat([ranked_gaps(r["scores"]) for rs in call(p64) for r in rs])

    return Case("zero-shot-classification", model, dict(tokenizer=tok), call, clear)


FEATURE_TEXT = ["the cat sat on the mat", "where is the big red house"]


def feature_extraction():
    tok = bert_tokenizer()
    model = _seeded(transformers.BertModel, _bert_cfg(tok))

    def call(pipe):
        return [pipe(t, return_tensors=True) for t in FEATURE_TEXT]

    return Case("feature-extraction", model, dict(tokenizer=tok), call, lambda m64, p64: [1.0])


DOC_WORDS = "john was in london and mary was in paris under a big tree".split()
DOC_BOXES = [[10 + 60 * (i % 4), 10 + 40 * (i // 4), 60 + 60 * (i % 4), 40 + 40 * (i // 4)]
             for i in range(len(DOC_WORDS))]
DOC_QUESTIONS = ["where was john", "who was in paris"]


def document_question_answering():
    tok = bert_tokenizer()
    cfg = transformers.LayoutLMConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                      max_2d_position_embeddings=1024, **BERT)
    model = _seeded(transformers.LayoutLMForQuestionAnswering, cfg)
    boxes = list(zip(DOC_WORDS, DOC_BOXES))

    def call(pipe, top_k=2):
        return [pipe(image=None, question=q, word_boxes=boxes, top_k=top_k) for q in DOC_QUESTIONS]

    def clear(_, p64):
        return torch.cat([ranked_gaps([a["score"] for a in ans]) for ans in call(p64, top_k=3)])

    return Case("document-question-answering", model, dict(tokenizer=tok), call, clear)


IMAGE = 32


def _images():
    rng = np.random.default_rng(0)
    from PIL import Image
    return [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(2)]


def image_classification():
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
    proc = ViTImageProcessorPil(size={"height": IMAGE, "width": IMAGE}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    cfg = transformers.ViTConfig(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=HIDDEN,
                                 num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
                                 initializer_range=0.2, **_labels(["cat", "dog", "bird", "fish", "tree"]))
    model = _seeded(transformers.ViTForImageClassification, cfg)
    images = _images()

    def call(pipe, top_k=3):
        return pipe(images, top_k=top_k)

    def clear(_, p64):
        return torch.cat([ranked_gaps([r["score"] for r in rs]) for rs in call(p64, top_k=4)])

    return Case("image-classification", model, dict(image_processor=proc), call, clear)


SAMPLING_RATE = 16000


def _audio(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SAMPLING_RATE
    return (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(n)).astype(np.float32)


def asr_ctc(tmp):
    tok = ctc_tokenizer(tmp)
    fe = transformers.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SAMPLING_RATE, padding_value=0.0,
                                               do_normalize=True, return_attention_mask=False)
    cfg = transformers.Wav2Vec2Config(
        vocab_size=len(CTC_VOCAB), hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, pad_token_id=0, mask_time_prob=0.0,
        initializer_range=0.2)
    model = _seeded(transformers.Wav2Vec2ForCTC, cfg)
    audio = [_audio(1600, 0), _audio(2400, 1)]

    def call(pipe):
        return [pipe(a) for a in audio]

    def clear(m64, _):
        gaps = []
        for a in audio:
            x = fe(a, sampling_rate=SAMPLING_RATE, return_tensors="pt").input_values.double()
            with torch.no_grad():
                gaps.append(top2_gaps(m64(x).logits).reshape(-1))
        return torch.cat(gaps)

    return Case("automatic-speech-recognition", model, dict(tokenizer=tok, feature_extractor=fe), call, clear)


MELS = 16


def asr_whisper():
    tok = whisper_tokenizer()
    fe = transformers.WhisperFeatureExtractor(feature_size=MELS, sampling_rate=SAMPLING_RATE, hop_length=160,
                                              chunk_length=1, n_fft=400)
    ids = {t: tok.convert_tokens_to_ids(t) for t in WHISPER_SPECIALS}
    cfg = transformers.WhisperConfig(
        vocab_size=len(tok), num_mel_bins=MELS, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
        max_source_positions=fe.nb_max_frames // 2, max_target_positions=32, init_std=0.2,
        pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"],
        decoder_start_token_id=ids["<|startoftranscript|>"], begin_suppress_tokens=None, suppress_tokens=None)
    model = _seeded(transformers.WhisperForConditionalGeneration, cfg)
    model.generation_config.no_timestamps_token_id = ids["<|notimestamps|>"]
    # Text tokens only (a random model favours the special ones, which decode to nothing).
    model.generation_config.suppress_tokens = [ids[t] for t in WHISPER_SPECIALS[1:]]
    audio = [_audio(8000, 2), _audio(12000, 3)]
    gen = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1)

    def call(pipe):
        return [pipe(a, generate_kwargs=gen) for a in audio]

    def clear(m64, _):
        gaps = []
        for a in audio:
            x = fe(a, sampling_rate=SAMPLING_RATE, return_tensors="pt").input_features.double()
            with torch.no_grad():
                out = m64.generate(x, **gen, output_logits=True, return_dict_in_generate=True)
            gaps += [top2_gaps(l) for l in out.logits]
        return torch.cat(gaps)

    return Case("automatic-speech-recognition", model, dict(tokenizer=tok, feature_extractor=fe), call, clear)


# Built once per module (CPU references computed once, shared by the modes).
@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    built = {}

    def get(name):
        if name not in built:
            maker = CASES[name]
            case = maker(tmp_path_factory.mktemp(name)) if name in NEEDS_TMP else maker()
            built[name] = case.reference()
        return built[name]

    return get


CASES = {
    "text-generation": text_generation,
    "fill-mask": fill_mask,
    "token-classification": token_classification,
    "text-classification": text_classification,
    "zero-shot-classification": zero_shot_classification,
    "feature-extraction": feature_extraction,
    "document-question-answering": document_question_answering,
    "image-classification": image_classification,
    "asr-wav2vec2-ctc": asr_ctc,
    "asr-whisper": asr_whisper,
}
NEEDS_TMP = {"asr-wav2vec2-ctc"}
XFAIL = {}  # case name -> the torch_tpu bug it shows (xfail, strict); none known


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=XFAIL[n])]
                                               if n in XFAIL else []) for n in CASES])
def test_pipeline(mode, cases, name):
    case = cases(name)
    out = case.call(case.tpu_pipe)
    assert_matches_cpu(out, case.cpu, case.exact)
