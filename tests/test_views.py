"""Storage and view semantics (DESIGN §3): views alias their base, writes through any view update every alias."""
import pytest
import torch

from conftest import assert_close

VIEWS = {
    "view": lambda t: t.view(4, 6),
    "reshape": lambda t: t.reshape(2, 12),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t[0].t(),
    "permute": lambda t: t.permute(2, 0, 1),
    "slice_step": lambda t: t[:, 1::2, ::3],
    "select": lambda t: t.select(1, 2),
    "narrow": lambda t: t.narrow(2, 1, 3),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t[:, :1].squeeze(1),
    "flatten": lambda t: t.flatten(1),
    "unflatten": lambda t: t.flatten().unflatten(0, (6, 4)),
    "diagonal": lambda t: t[0].diagonal(),
    "unfold": lambda t: t[1].unfold(1, 2, 2),
    "as_strided": lambda t: t.as_strided((3, 3), (5, 2), 1),
    "split": lambda t: t.split(1, dim=0)[1],
    "chunk": lambda t: t.chunk(2, dim=2)[1],
    "index_int": lambda t: t[1, 2],
}


def base_pair():
    cpu = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    return cpu, cpu.clone().to("tpu")


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_read_view(name, mode):
    cpu, tpu = base_pair()
    assert_close(VIEWS[name](tpu), VIEWS[name](cpu))
    assert_close(VIEWS[name](tpu).contiguous(), VIEWS[name](cpu).contiguous())


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_inplace_through_view_updates_base(name, mode):
    cpu, tpu = base_pair()
    v_cpu, v_tpu = VIEWS[name](cpu), VIEWS[name](tpu)
    v_cpu.mul_(-2).add_(1)
    v_tpu.mul_(-2).add_(1)
    assert_close(tpu, cpu)
    assert_close(v_tpu, v_cpu)


@pytest.mark.parametrize("name", ["transpose", "slice_step", "select", "diagonal", "permute"])
def test_copy_into_view_from_cpu_and_tpu(name, mode):
    cpu, tpu = base_pair()
    src = torch.randn(VIEWS[name](cpu).shape)
    VIEWS[name](cpu).copy_(src)
    VIEWS[name](tpu).copy_(src)
    assert_close(tpu, cpu)
    VIEWS[name](cpu).copy_(src * 3)
    VIEWS[name](tpu).copy_((src * 3).to("tpu"))
    assert_close(tpu, cpu)


def test_aliases_see_writes(mode):
    cpu, tpu = base_pair()
    a, b = tpu[0], tpu.view(-1)
    a.fill_(7)
    cpu[0].fill_(7)
    assert_close(b, cpu.view(-1))
    assert_close(tpu, cpu)


def test_overlapping_write_raises_like_cpu(mode):
    x = torch.zeros(3, device="tpu")
    e = x.expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1)
    cpu = torch.zeros(3).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        cpu.add_(1)


def test_expand_reads_broadcast(mode):
    cpu = torch.arange(3.0)
    assert_close(cpu.to("tpu").expand(2, 3) + 1, cpu.expand(2, 3) + 1)


def test_contiguous_and_data_ptr(mode):
    cpu, tpu = base_pair()
    t = tpu.transpose(1, 2)
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.data_ptr() != tpu.data_ptr()
    assert_close(c, cpu.transpose(1, 2).contiguous())
    assert tpu.contiguous().data_ptr() == tpu.data_ptr()


def test_dtype_view_reinterprets_bytes(mode):
    cpu = torch.tensor([1.0, -2.5, 3.25, 0.0])
    tpu = cpu.to("tpu")
    assert_close(tpu.view(torch.int32), cpu.view(torch.int32))
    tpu.view(torch.int32).add_(1)
    cpu.view(torch.int32).add_(1)
    assert_close(tpu, cpu)


def test_resize_and_set(mode):
    x = torch.arange(4.0).to("tpu")
    x.resize_(8)
    assert x.shape == (8,)
    assert_close(x[:4], torch.arange(4.0))
    y = torch.empty(0, device="tpu")
    y.set_(x.untyped_storage(), 2, (2, 2), (2, 1))
    assert_close(y, x.cpu().as_strided((2, 2), (2, 1), 2))
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_zero_size_and_scalars(mode):
    e = torch.empty(0, 3, device="tpu")
    assert (e + 1).shape == (0, 3)
    s = torch.tensor(2.5).to("tpu")
    assert s.dim() == 0 and s.item() == 2.5
    assert_close(s * 2, torch.tensor(5.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                                   torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_roundtrip_dtypes(dtype, mode):
    cpu = (torch.arange(-6, 6) % 3 == 0) if dtype == torch.bool else torch.arange(-6, 6).to(dtype)
    if dtype == torch.uint8:
        cpu = torch.arange(0, 12).to(dtype)
    tpu = cpu.to("tpu")
    assert tpu.dtype == dtype
    assert torch.equal(tpu.cpu(), cpu)
    assert torch.equal(tpu[1::3].cpu(), cpu[1::3])
    assert torch.equal(tpu.to(torch.float32).cpu(), cpu.to(torch.float32))


def test_non_blocking_and_tpu_to_tpu_copy(mode):
    cpu = torch.randn(5, 5)
    a = cpu.to("tpu", non_blocking=True)
    b = torch.empty(5, 5, device="tpu")
    b.copy_(a.t(), non_blocking=True)
    assert_close(b, cpu.t())
    out = torch.empty(5, 5)
    out.copy_(b, non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(out, cpu.t())


def test_untyped_storage_resize_keeps_bytes(mode):
    x = torch.arange(4.0).to("tpu")
    s = x.untyped_storage()
    s.resize_(32)
    assert s.nbytes() == 32
    y = torch.empty(0, device="tpu").set_(s, 0, (8,), (1,))
    assert_close(y[:4], torch.arange(4.0))
    s.resize_(8)
    z = torch.empty(0, device="tpu").set_(s, 0, (2,), (1,))
    assert_close(z, torch.arange(2.0))


# Strided views whose strides nest are written as a block (slice, update, write back: no scatter), including a
# block that runs past the storage's end and, in a loop, the same program at every offset.
BLOCK_WRITES = {
    "rows_cols": lambda t: t[2:5, 3:7],
    "last_rows": lambda t: t[7:, 8:],  # its block (3 rows of 10) runs 8 elements past the storage
    "transposed": lambda t: t.t()[1:6, 2:4],
    "step": lambda t: t[1::3, ::2],
    "permuted_3d": lambda t: t.view(4, 5, 5).permute(2, 0, 1)[1:4, :, 2:5],
    "column": lambda t: t[:, 9],
}


@pytest.mark.parametrize("name", sorted(BLOCK_WRITES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool, torch.complex64])
def test_block_write_through_view(name, dtype, mode):
    cpu = torch.arange(100).reshape(10, 10).to(dtype)
    tpu = cpu.to("tpu")
    view = BLOCK_WRITES[name]
    src = (torch.arange(view(cpu).numel()).reshape(view(cpu).shape) % 3 == 1).to(dtype)
    view(cpu).copy_(src)
    view(tpu).copy_(src.to("tpu"))
    assert torch.equal(tpu.cpu(), cpu)


def test_block_write_at_every_offset(mode):
    cpu = torch.arange(100.0).reshape(10, 10)
    tpu = cpu.to("tpu")
    for i in range(9):  # the last windows' blocks run past the storage's end
        cpu[i:i + 2, 7:10].mul_(-2).add_(i)
        tpu[i:i + 2, 7:10].mul_(-2).add_(i)
    assert torch.equal(tpu.cpu(), cpu)
