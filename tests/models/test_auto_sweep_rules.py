"""tools/model_sweep.py's rule (c) and (e) helpers: SameRandom (same_random.py) and Widen (widen.py), on CPU and tpu.

SameRandom must give every run the same numbers whatever the global seed, dtype or device; Widen must let a model
that hard-codes float32 run its float64 reference in float64 throughout.
"""
import torch
import torch.nn.functional as F

from same_random import SameRandom
from widen import Widen


def _draws(dtype, device):
    x = torch.ones(4, 5, dtype=dtype, device=device)
    out = [torch.randn(3, 4, dtype=dtype, device=device), torch.rand((2, 3), dtype=dtype, device=device),
           torch.randn_like(x), torch.rand_like(x), torch.empty(6, dtype=dtype, device=device).normal_(1.0, 2.0),
           torch.empty(6, dtype=dtype, device=device).uniform_(-1, 1),
           torch.empty(6, dtype=dtype, device=device).exponential_(),
           F.dropout(x, 0.5, training=True), torch.bernoulli(torch.full((8,), 0.5, dtype=dtype, device=device)),
           torch.randint(0, 10, (5,), device=device), torch.randperm(7, device=device),
           torch.multinomial(torch.tensor([0.1, 0.2, 0.7], dtype=dtype, device=device), 2),
           torch.normal(torch.zeros(3, dtype=dtype, device=device), 1.0)]
    return [t.cpu().double() for t in out]


def _under(seed, dtype, device):
    torch.manual_seed(seed)
    with SameRandom(seed=0) as rng:
        return _draws(dtype, device), rng


def test_auto_same_random_seed_dtype_independent():
    a, rng = _under(0, torch.float32, "cpu")
    b, _ = _under(1, torch.float32, "cpu")
    c, _ = _under(2, torch.float64, "cpu")
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y)
        # float64 sees float32's draws: float32's values are float64's rounded (an affine fill such as
        # normal_(1, 2) is computed in float64, then rounded to the tensor's dtype), every other draw is equal
        assert torch.equal(x, z.float().double())
    assert rng.calls["torch.randn"] == 1 and rng.calls["F.dropout"] == 1 and rng.calls["Tensor.normal_"] == 1


def test_auto_same_random_on_tpu():
    a, _ = _under(0, torch.float32, "cpu")
    t, _ = _under(1, torch.float32, "tpu")
    for x, y in zip(a, t):
        assert torch.equal(x, y)


def test_auto_same_random_eval_dropout_draws_nothing():
    x = torch.randn(4)
    with SameRandom() as rng:
        assert torch.equal(F.dropout(x, 0.5, training=False), x)
    assert rng.calls == {} and rng.index == 0


def test_auto_widen_float64_reference():
    class Casts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = x.float() * torch.ones(4, dtype=torch.float32)  # float32 hard-coded, as Autoformer/MRA do
            return self.lin(h.to(torch.float32)) + torch.full((), torch.finfo(x.dtype).min).clamp_min(0)

    m = Casts().double()
    x = torch.randn(2, 4, dtype=torch.float64)
    try:
        m(x)
        raise AssertionError("the plain float64 forward was expected to fail")
    except RuntimeError:
        pass
    with Widen() as w:
        out = m(x)
    assert out.dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32
    assert w.calls["Tensor.float"] == 1


def test_auto_shrink_state_space_sizes():
    """auto_zoo.shrink: a Mamba-2 scan's state, chunk and heads shrink (chunks shorter than the inputs, so the scan
    crosses a chunk boundary), and a layer pattern that is itself the layer count keeps one layer of each kind."""
    import auto_zoo
    d = auto_zoo.shrink({"hidden_size": 2688, "ssm_state_size": 128, "chunk_size": 128, "mamba_num_heads": 64,
                         "mamba_head_dim": 64, "n_groups": 8, "time_step_rank": 256,
                         "layers_block_type": ["linear_attention", "moe"] * 5 + ["full_attention", "moe"]})
    assert d["ssm_state_size"] == auto_zoo.SSM_STATE and d["chunk_size"] == auto_zoo.SSM_CHUNK < auto_zoo.SEQ
    assert d["mamba_num_heads"] == auto_zoo.HEADS_N and d["n_groups"] == 4 and d["time_step_rank"] == 4
    assert d["mamba_num_heads"] * d["mamba_head_dim"] == 2 * d["hidden_size"]
    assert d["layers_block_type"] == ["linear_attention", "moe", "full_attention"]
    # A chunk size in a config with no state-space scan (audio chunking) is not a scan's.
    assert auto_zoo.shrink({"hidden_size": 64, "chunk_size": 50})["chunk_size"] == 50


def test_auto_shrink_detector_backbone_ties():
    """auto_zoo.shrink: a stage-based backbone keeps its stage selection (a detector's neck takes one input per
    stage), HGNet's stage channels follow the shrunk stage widths, and sizes tied to d_model follow it."""
    import auto_zoo
    hgnet = {"model_type": "hgnet_v2", "depths": [3, 4, 6, 3], "hidden_sizes": [256, 512, 1024, 2048],
             "stem_channels": [3, 32, 48], "stage_in_channels": [48, 128, 512, 1024],
             "stage_mid_channels": [48, 96, 192, 384], "stage_out_channels": [128, 512, 1024, 2048],
             "stage_num_blocks": [1, 1, 3, 1], "stage_numb_of_layers": [6, 6, 6, 6], "out_indices": [2, 3, 4]}
    d = auto_zoo.shrink({"d_model": 256, "encoder_hidden_dim": 256, "decoder_in_channels": [256, 256, 256],
                         "num_queries": 300, "backbone_config": hgnet})
    b = d["backbone_config"]
    assert b["out_indices"] == [2, 3, 4] and b["stage_out_channels"] == b["hidden_sizes"]
    assert b["stage_in_channels"][1:] == b["stage_out_channels"][:-1] and b["stage_in_channels"][0] == b["stem_channels"][-1]
    assert d["encoder_hidden_dim"] == d["d_model"] == auto_zoo.HIDDEN and d["decoder_in_channels"] == [auto_zoo.HIDDEN] * 3
    assert d["num_queries"] == auto_zoo.QUERIES
    # A layer-based backbone's indices name layers that no longer exist: left for the config to derive.
    assert auto_zoo.shrink({"num_hidden_layers": 12, "out_indices": [12]})["out_indices"] is None


def test_auto_tiny_config_rederives_sizes():
    """auto_zoo.tiny_config: sizes a config derives in __post_init__ (SAM's image_embedding_size) are derived again
    from the shrunk sizes, not taken from to_dict()'s defaults."""
    import auto_zoo
    cfg = auto_zoo.tiny_config("sam")
    p = cfg.prompt_encoder_config
    assert p.image_embedding_size == p.image_size // p.patch_size


def test_auto_shrink_listed_blocks():
    """auto_zoo.shrink: PP-LCNet's per-stage block lists keep each stage's first block (the one that makes the
    stage's width), one branch a convolution, and a recogniser's character classes the tiny vocabulary."""
    import auto_zoo
    d = auto_zoo.shrink({"block_configs": [[[3, 16, 32, 1, False]], [[3, 32, 64, 2, False], [3, 64, 64, 1, False]]],
                         "conv_symmetric_num": 4, "head_out_channels": 18714})
    assert d["block_configs"] == [[[3, 16, 32, 1, False]], [[3, 32, 64, 2, False]]]
    assert d["conv_symmetric_num"] == 1 and d["head_out_channels"] == auto_zoo.VOCAB
