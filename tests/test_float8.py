"""float8 on tpu: the five float8 dtypes as storage (bit-exact conversions and copies against CPU), the ops
CPU implements for them, ops CPU lacks (computed in float32 and rounded), printing, and torch._scaled_mm
(tensor-wise and row-wise scales) against CPU's kernel and a float64 reference."""
import pytest
import torch

from conftest import assert_close, nonfinite_ok

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
          torch.float8_e8m0fnu]
IDS = [str(d).split(".")[-1] for d in FLOAT8]


def _bits(t):
    return t.cpu().view(torch.uint8)


def _probe_values():
    # Every float16 (all rounding cases of the float8 ranges, subnormals, inf, NaN) as float32, plus values
    # beyond float16: float32 subnormals, the e8m0 range, overflow past 2^127.
    halves = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    extra = torch.tensor([2.0 ** -149, 2.0 ** -127, 2.0 ** -126 * 1.5, 1e-40, 1e30, -1e30, 1e38, 3e38, 3.4e38,
                          float("inf"), -float("inf"), float("nan"), 2.0 ** 120 * 1.5, 61439.0, 61440.0, 248.0])
    return torch.cat([halves, extra])


def _all_codes(dtype):
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_conversion_to_float8_is_bit_exact(mode, dtype, source):
    x = _probe_values().to(source)
    got = x.to("tpu").to(dtype)
    assert got.dtype == dtype and got.device.type == "tpu"
    expected = x.to(dtype)
    nan = expected.float().isnan()
    # NaN is NaN in every format (its code for e4m3fn keeps the sign, as on CPU); other codes match exactly.
    assert torch.equal(got.cpu().float().isnan(), nan)
    assert torch.equal(_bits(got)[~nan], _bits(expected)[~nan])


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
def test_integer_and_bool_to_float8(mode, dtype):
    ints = torch.tensor([0, 1, -1, 3, 7, 17, 100, 239, 241, 447, 449, 1000, 60000, -70000], dtype=torch.int64)
    for x in (ints, ints.int(), ints.to(torch.int16), torch.tensor([True, False])):
        with nonfinite_ok():  # -70000 overflows e5m2 to -inf (debug mode would raise)
            assert torch.equal(_bits(x.to("tpu").to(dtype)), _bits(x.to(dtype)))


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
@pytest.mark.parametrize("target", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                                    torch.bool])
def test_conversion_from_float8(mode, dtype, target):
    codes = _all_codes(dtype)
    if target == torch.int32:  # float -> int of NaN, inf or beyond int32 is undefined in C++ (CPU's is arbitrary)
        codes = codes[codes.float().abs() < 2.0 ** 31]
    got = codes.to("tpu").to(target)
    assert_close(got, codes.to(target), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
def test_storage_round_trip_and_views(mode, dtype):
    codes = _all_codes(dtype)
    t = codes.to("tpu")
    assert torch.equal(_bits(t), _bits(codes))
    assert torch.equal(t.view(torch.uint8).cpu(), codes.view(torch.uint8))
    assert torch.equal(_bits(torch.empty(0, dtype=dtype, device="tpu")), _bits(torch.empty(0, dtype=dtype)))
    m = codes.reshape(16, 16)
    tm = m.to("tpu")
    for f in (lambda x: x.t().contiguous(), lambda x: x[::2, 1::3].clone(), lambda x: x.reshape(4, 64),
              lambda x: x.t().reshape(-1)):
        assert torch.equal(_bits(f(tm)), _bits(f(m)))
    u = torch.arange(256, dtype=torch.int32).to(torch.uint8).to("tpu")
    assert torch.equal(_bits(u.view(dtype)), _bits(codes))


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
def test_ops_cpu_implements_for_float8(mode, dtype):
    torch.manual_seed(0)
    x = (torch.randn(6, 5) * 4).to(dtype)
    y = (torch.randn(6, 5) * 4).to(dtype)
    tx, ty = x.to("tpu"), y.to("tpu")
    idx = torch.tensor([4, 0, 2])
    same = [
        (lambda a, b: torch.cat([a, b]), True),
        (lambda a, b: torch.stack([a, b], 1), True),
        (lambda a, b: torch.where(a.float() > b.float(), a, b), True),
        (lambda a, b: a[idx.to(a.device)], True),
        (lambda a, b: a.index_select(1, idx.to(a.device)), True),
        (lambda a, b: a == b, False),
        (lambda a, b: a.isnan(), False),
        (lambda a, b: a.clone().fill_(2.5), True),
        (lambda a, b: a.clone().copy_(b.float()), True),
    ]
    if dtype != torch.float8_e8m0fnu:  # CPU lacks abs and index_put for e8m0
        same.append((lambda a, b: a.abs(), True))
        same.append((lambda a, b: a.clone().index_put_((idx.to(a.device),), b[:3]), True))
    for f, is_float8 in same:
        expected, got = f(x, y), f(tx, ty)
        assert got.dtype == expected.dtype
        if is_float8:
            assert torch.equal(_bits(got), _bits(expected))
        else:
            assert torch.equal(got.cpu(), expected)
    for make in (torch.zeros, torch.ones):
        assert torch.equal(_bits(make(3, dtype=dtype, device="tpu")), _bits(make(3, dtype=dtype)))
    assert torch.equal(_bits(torch.full((2,), 200.0, dtype=dtype, device="tpu")),
                       _bits(torch.full((2,), 200.0, dtype=dtype)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.float16, torch.bfloat16] + FLOAT8,
                         ids=lambda d: str(d).split(".")[-1])
def test_fill_refuses_values_the_dtype_cannot_hold(mode, dtype):
    # As on CPU: torch.full / fill_ raise instead of storing a wrapped or saturated value.
    for v in (3.0, 300.0, 1e6, 1e39, -1.0):
        try:
            expected = torch.full((2,), v, dtype=dtype)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="overflow"):
                torch.full((2,), v, dtype=dtype, device="tpu")
            continue
        assert torch.equal(torch.full((2,), v, dtype=dtype, device="tpu").cpu().view(torch.uint8),
                           expected.view(torch.uint8))


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
def test_ops_cpu_lacks_compute_in_float32(mode, dtype):
    # CPU implements no arithmetic for float8; tpu computes any op on float8 inputs in float32 and rounds the
    # result to float8 once, which is what CPU does for the float8 ops it has.
    torch.manual_seed(1)
    x = (torch.rand(8) * 8 + 0.5).to(dtype)
    y = (torch.rand(8) * 8 + 0.5).to(dtype)
    tx, ty = x.to("tpu"), y.to("tpu")
    m = (torch.randn(4, 6) * 3).to(dtype)
    ops = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a.sum(), lambda a, b: a.max(),
           lambda a, b: a.reshape(2, 4).amax(1), lambda a, b: a.sort().values, lambda a, b: a.clamp(1, 4),
           lambda a, b: a.reshape(2, 4) @ b.reshape(4, 2), lambda a, b: a.cumsum(0),
           lambda a, b: a.scatter(0, torch.zeros(1, dtype=torch.long, device=a.device), 2.0)]
    for f in ops:
        assert torch.equal(_bits(f(tx, ty)), _bits(f(x.float(), y.float()).to(dtype)))
    tm = m.to("tpu")
    assert torch.equal(tm.argmax(1).cpu(), m.float().argmax(1))
    assert torch.equal(_bits(tm.softmax(1)), _bits(m.float().softmax(1).to(dtype)))


@pytest.mark.parametrize("dtype", FLOAT8, ids=IDS)
def test_printing(dtype):
    x = torch.tensor([[0.5, 1.0, 2.0], [4.0, 8.0, 0.25]]).to(dtype)
    assert repr(x.to("tpu")) == repr(x).replace("dtype=", "device='tpu:0', dtype=")
    assert str(x.to("tpu")[0, 1].item()) == str(x[0, 1].item())


def _reference(a, b, sa, sb, bias=None):
    r = (a.double() * sa.double()) @ (b.double() * sb.double())
    return r if bias is None else r + bias.double()


def _check_scaled_mm(got, expected_cpu, reference, out_dtype, bound):
    # tpu and CPU both contract in float32, in different orders: each stays within the float32 summation bound
    # `bound` of the float64 reference, plus one rounding of the output format.
    assert got.dtype == out_dtype and got.shape == expected_cpu.shape
    eps = torch.finfo(out_dtype).eps if out_dtype.is_floating_point else 1.0
    ulp = reference.abs() * eps + bound
    got_err = (got.cpu().double() - reference).abs()
    cpu_err = (expected_cpu.double() - reference).abs()
    assert bool((cpu_err <= ulp + 1e-30).all()), "the bound does not hold for CPU itself"
    assert bool((got_err <= ulp + 1e-30).all()), float((got_err - ulp).max())


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn])
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_scaled_mm(mode, out_dtype, rowwise):
    torch.manual_seed(2)
    m, k, n = 5, 48, 7
    a = torch.randn(m, k).to(torch.float8_e4m3fn)
    b = torch.randn(n, k).to(torch.float8_e4m3fn).t()  # column-major, as cuBLAS wants it
    sa, sb = (torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5) if rowwise else (torch.tensor(0.75), torch.tensor(1.5))
    bias = torch.randn(n).to(out_dtype if out_dtype.itemsize > 1 else torch.float32)
    eps32 = torch.finfo(torch.float32).eps
    for with_bias in (False, True):
        kw = dict(out_dtype=out_dtype, bias=bias if with_bias else None)
        expected = torch._scaled_mm(a, b, sa, sb, **kw)
        got = torch._scaled_mm(*(t.to("tpu") for t in (a, b, sa, sb)), out_dtype=out_dtype,
                               bias=bias.to("tpu") if with_bias else None)
        ref = _reference(a, b, sa, sb, bias if with_bias else None)
        bound = 2 * k * eps32 * ((a.double().abs() * sa.double()) @ (b.double().abs() * sb.double()))
        _check_scaled_mm(got, expected, ref, out_dtype, bound + (bias.double().abs() * eps32 if with_bias else 0))


def test_scaled_mm_float8_result_scale_and_formats(mode):
    torch.manual_seed(3)
    a = torch.randn(4, 32).to(torch.float8_e5m2)
    b = torch.randn(6, 32).to(torch.float8_e4m3fn).t()
    one, s = torch.tensor(1.0), torch.tensor(4.0)
    ta, tb, tone, ts = (t.to("tpu") for t in (a, b, one, s))
    for out_dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz):
        # scale_result divides e4m3fn and e5m2 results only, as on CPU.
        expected = torch._scaled_mm(a, b, one, one, scale_result=s, out_dtype=out_dtype)
        got = torch._scaled_mm(ta, tb, tone, tone, scale_result=ts, out_dtype=out_dtype)
        assert torch.equal(_bits(got), _bits(expected))
    # default out dtype: mat_a's
    assert torch.equal(_bits(torch._scaled_mm(ta, tb, tone, tone)), _bits(torch._scaled_mm(a, b, one, one)))
    out = torch.empty(0, dtype=torch.float32, device="tpu")
    torch._scaled_mm(ta, tb, tone, tone, out_dtype=torch.float32, out=out)
    assert_close(out, torch._scaled_mm(a, b, one, one, out_dtype=torch.float32), rtol=1e-6, atol=1e-5)


def test_scaled_mm_bad_input():
    a = torch.randn(4, 32).to(torch.float8_e4m3fn).to("tpu")
    b = torch.randn(8, 32).to(torch.float8_e4m3fn).t().to("tpu")
    one = torch.tensor(1.0, device="tpu")
    with pytest.raises(ValueError, match="scaling"):
        torch._scaled_mm(a.float(), b, one, one)
    with pytest.raises(ValueError, match="scaling"):
        torch._scaled_mm(a, b, one.double(), one)
    with pytest.raises(ValueError, match="scaling"):
        torch._scaled_mm(a, b, torch.ones(4, device="tpu"), torch.ones(8, device="tpu"))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch._scaled_mm(a[:, :16], b, one, one)
    with pytest.raises(RuntimeError, match="matrix"):
        torch._scaled_mm(a.unsqueeze(0), b, one, one)
    with pytest.raises(RuntimeError, match="bias"):
        torch._scaled_mm(a, b, one, one, bias=torch.zeros(4, 8, device="tpu"), out_dtype=torch.float32)
    with pytest.raises(RuntimeError, match="float8 bias"):
        torch._scaled_mm(a, b, one, one, bias=torch.zeros(8, device="tpu").to(torch.float8_e4m3fn),
                         out_dtype=torch.float32)
