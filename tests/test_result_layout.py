"""How pointwise results are laid out: the sizes, strides and contiguity CPU's TensorIterator gives a new
result (csrc/aten/Elementwise.h, emptyPointwise), for every kind of operand layout, in every mode.

A result's strides are observable: `.view()` refuses or accepts by them, `is_contiguous()` branches on them,
`.t()` and `.unbind()` of a result have them. CPU keeps the operands' layout (x.t().exp() is transposed like
x.t(); a channels_last input gives a channels_last result) and, where operands disagree or broadcast,
orders dimensions by their strides. The expected strides are CPU's own, computed in the same test.
"""
import pytest
import torch
import torch.nn.functional as F

DEV = "tpu"


def layouts():
    """name -> a function of a device giving a float32 tensor in that layout (same values on every device)."""
    base = torch.arange(1.0, 121.0).div_(37.0)

    def make(fn):
        return lambda dev: fn(base.to(dev))

    return {
        "contiguous": make(lambda b: b.view(2, 3, 4, 5)),
        "transposed": make(lambda b: b[:12].view(3, 4).t()),
        "permuted": make(lambda b: b[:60].view(3, 4, 5).permute(2, 0, 1)),
        "channels_last": make(lambda b: b.view(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)),
        "sliced": make(lambda b: b[:60].view(3, 4, 5)[:, ::2, 1:]),
        "expanded": make(lambda b: b[:4].view(4, 1).expand(4, 3)),
        "size_one_odd_stride": make(lambda b: b[:3].as_strided((1, 3), (1, 1))),
        "size_one_leading": make(lambda b: b[:12].view(1, 3, 4).transpose(1, 2)),
        "empty_permuted": make(lambda b: b[:0].view(2, 0, 3).permute(2, 0, 1)),
        "scalar": make(lambda b: b[5].clone()),
    }


UNARY = {
    "exp": torch.exp,
    "neg": torch.neg,
    "sigmoid": torch.sigmoid,
    "softplus": F.softplus,
    "gelu": F.gelu,
    "elu": F.elu,
    "angle": torch.angle,
    "polygamma": lambda x: torch.polygamma(1, x),
    "round_decimals": lambda x: torch.round(x, decimals=2),
    "special_erfcx": torch.special.erfcx,
    "clamp_scalar": lambda x: torch.clamp(x, 0.5, 2.0),
    "pow_scalar": lambda x: torch.pow(x, 2),
    "add_wrapped_number": lambda x: x + 1,
    "mul_scalar_overload": lambda x: torch.mul(x, 3),
    "rsub_number": lambda x: 1 - x,
    "lerp_scalar_weight": lambda x: torch.lerp(x, x * 2, 0.3),
    "where_self": lambda x: torch.where(x > 1, x, -x),
    "flip": lambda x: torch.flip(x, (0,)),  # not pointwise, but laid out as its input (fuzz seed 875)
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("layout", sorted(layouts()))
def test_result_of_one_operand_is_laid_out_as_on_cpu(op, layout, mode):
    make, fn = layouts()[layout], UNARY[op]
    expected, got = fn(make("cpu")), fn(make(DEV))
    assert got.shape == expected.shape
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert got.is_contiguous() == expected.is_contiguous()
    torch.testing.assert_close(got.cpu(), expected, rtol=1.3e-6, atol=1e-5, equal_nan=True)


PAIRS = [
    ("transposed", "contiguous_2d"),
    ("contiguous_2d", "transposed"),
    ("transposed", "row"),
    ("row", "transposed"),
    ("column", "row"),
    ("permuted", "permuted_other"),
    ("channels_last", "channels_last"),
    ("channels_last", "contiguous"),
    ("size_one_odd_stride", "size_one_odd_stride"),
    ("transposed", "tpu_0dim"),
]


def operand(name, dev):
    base = torch.arange(1.0, 121.0).div_(29.0).to(dev)
    return {
        "contiguous_2d": lambda: base[:12].view(4, 3),
        "transposed": lambda: base[:12].view(3, 4).t(),
        "row": lambda: base[:3].view(1, 3),
        "column": lambda: base[:4].view(4, 1),
        "permuted": lambda: base[:60].view(3, 4, 5).permute(2, 0, 1),
        "permuted_other": lambda: base[:60].view(5, 4, 3).transpose(1, 2),
        "channels_last": lambda: base.view(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
        "contiguous": lambda: base.view(2, 3, 4, 5),
        "size_one_odd_stride": lambda: base[:3].as_strided((1, 3), (1, 1)),
        "tpu_0dim": lambda: base[7].clone(),
    }[name]()


BINARY = {
    "add": torch.add,
    "mul": torch.mul,
    "maximum": torch.maximum,
    "atan2": torch.atan2,
    "xlogy": torch.special.xlogy,
    "floor_divide": torch.floor_divide,
    "eq": torch.eq,
    "lerp_tensor_weight": lambda a, b: torch.lerp(a, b, torch.full_like(b, 0.25)),
    "clamp_tensor": lambda a, b: torch.clamp(a, min=b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5),
    "where": lambda a, b: torch.where(a > b, a, b),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_result_of_several_operands_is_laid_out_as_on_cpu(op, pair, mode):
    fn = BINARY[op]
    a, b = pair
    expected = fn(operand(a, "cpu"), operand(b, "cpu"))
    got = fn(operand(a, DEV), operand(b, DEV))
    assert got.shape == expected.shape
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    torch.testing.assert_close(got.cpu(), expected, rtol=1.3e-6, atol=1e-5, equal_nan=True)


def test_a_view_of_a_transposed_result_raises_as_on_cpu(mode):
    # x.t().exp() is transposed on CPU, so .view(-1) cannot flatten it; tpu must refuse it too.
    for dev in ("cpu", DEV):
        y = torch.arange(6.0, device=dev).view(2, 3).t().exp()
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            y.view(-1)
        assert y.reshape(-1).shape == (6,)


def test_compiled_results_are_laid_out_as_on_cpu():
    # Fuzz seed 455: a compiled function returning a permuted intermediate written in place.
    def fn(c, x, y, s):
        v = torch.sign(torch.where(c, x, y)).permute(1, 0)
        v.add_(s)
        return v

    c = torch.tensor([[True, False, True], [True, False, False]])
    x = torch.tensor([[25, -85, -88], [98, 36, -80]])
    y = torch.tensor([[-1, -2, 4], [1, 0, -4]])
    s = torch.tensor(-50)
    expected = fn(c, x, y, s)
    compiled = torch.compile(fn, backend="tpu")
    for _ in range(2):  # the second call replays
        got = compiled(*(t.to(DEV) for t in (c, x, y, s)))
        assert got.stride() == expected.stride()
        assert torch.equal(got.cpu(), expected)
