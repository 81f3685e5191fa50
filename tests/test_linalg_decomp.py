"""Orthogonal decompositions and what builds on them (qr, eigh/eigvalsh, svd/svdvals, pinv, matrix_norm(2),
matrix_rank, lstsq, matrix_exp, nn.init.orthogonal_) on tpu against CPU: values and gradients must be as close
to a float64 CPU reference as CPU float32 is (4x CPU's largest error plus 1e-5, tests/opinfo/harness.py's rule).
Eigenvectors and singular vectors are compared through sign-invariant quantities (LAPACK's signs are not a
contract); QR's factors directly (our reflectors follow LAPACK's sign convention)."""
import pytest
import torch

CPU_ERROR_FACTOR = 4
RTOL = ATOL = 1e-5


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def assert_as_accurate(actual, cpu, ref, what=""):
    assert actual.device.type == "tpu", f"{what}: result is on {actual.device}"
    a, e, r = actual.detach().cpu().double(), cpu.detach().double(), ref.detach().double()
    assert a.shape == e.shape == r.shape, f"{what}: {a.shape} {e.shape} {r.shape}"
    bound = CPU_ERROR_FACTOR * (e - r).abs().max() + ATOL + RTOL * r.abs()
    err = (a - r).abs()
    assert bool((err <= bound).all()), f"{what}: tpu error {err.max():.3g}, CPU float32 error {(e - r).abs().max():.3g}"


def check_fn(fn, *inputs, grad=True):
    def run(device, dtype):
        xs = [x.detach().to(device=device, dtype=dtype, copy=True).requires_grad_(grad) for x in inputs]
        out = fn(*xs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        grads = []
        if grad:
            cot = [torch.randn(o.shape, generator=gen(7)).to(device=device, dtype=o.dtype) for o in outs]
            grads = list(torch.autograd.grad(outs, xs, cot))
        return outs, grads
    t, c, r = run("tpu", torch.float32), run("cpu", torch.float32), run("cpu", torch.float64)
    for k in range(2):
        assert len(t[k]) == len(c[k])
        for i, (a, e, ref) in enumerate(zip(t[k], c[k], r[k])):
            assert_as_accurate(a, e, ref, f"{'output' if k == 0 else 'grad'} {i}")


SHAPES = [(5, 3), (3, 5), (4, 4), (2, 6, 4)]


@pytest.mark.parametrize("shape,qr_mode", [((5, 3), "reduced"), ((3, 5), "complete"), ((4, 4), "r"),
                                           ((2, 6, 4), "reduced"), ((5, 3), "complete"), ((3, 5), "reduced")])
def test_qr(mode, shape, qr_mode):
    a = torch.randn(*shape, generator=gen())
    m, n = shape[-2:]
    differentiable = qr_mode == "reduced" or (qr_mode == "complete" and m <= n)
    fn = lambda a: torch.linalg.qr(a, mode=qr_mode)[1] if qr_mode == "r" else torch.linalg.qr(a, mode=qr_mode)
    check_fn(fn, a, grad=differentiable and qr_mode != "r")
    if qr_mode != "r":
        q, r = torch.linalg.qr(a.to("tpu"), mode=qr_mode)
        k = q.shape[-1]
        torch.testing.assert_close((q.mT @ q).cpu(), torch.eye(k).expand(q.mT.shape[:-1] + (k,)), atol=1e-5, rtol=0)
        assert bool((r.cpu().tril(-1) == 0).all())


def test_qr_triangular_input_is_unchanged(mode):
    # LAPACK does not reflect a column that is already zero below the diagonal: Q = I, R = A.
    a = torch.tensor([[2.0, 1.0], [0.0, 3.0]])
    q, r = torch.linalg.qr(a.to("tpu"))
    assert torch.equal(q.cpu(), torch.eye(2)) and torch.equal(r.cpu(), a)


def test_orthogonal_init(mode):
    w = torch.empty(6, 4, device="tpu")
    torch.manual_seed(0)
    torch.nn.init.orthogonal_(w)
    torch.testing.assert_close((w.T @ w).cpu(), torch.eye(4), atol=1e-5, rtol=0)
    w2 = torch.empty(3, 5, device="tpu")
    torch.nn.init.orthogonal_(w2, gain=2.0)
    torch.testing.assert_close((w2 @ w2.T).cpu(), 4 * torch.eye(3), atol=1e-4, rtol=0)


def sym(n, batch=(), seed=0):
    a = torch.randn(*batch, n, n, generator=gen(seed))
    return a + a.mT


@pytest.mark.parametrize("batch,n", [((), 1), ((), 5), ((3,), 4)])
def test_eigh(mode, batch, n):
    a = sym(n, batch)
    # Sign-invariant outputs: eigenvalues and the squared eigenvector entries (distinct eigenvalues).
    check_fn(lambda a: (torch.linalg.eigh(a)[0], torch.linalg.eigh(a)[1] ** 2), a)
    check_fn(lambda a: torch.linalg.eigvalsh(a, UPLO="U"), a)
    w, v = torch.linalg.eigh(a.to("tpu"))
    torch.testing.assert_close((v @ torch.diag_embed(w) @ v.mT).cpu(), a, atol=1e-4, rtol=1e-5)


def test_eigh_reads_one_triangle(mode):
    a = sym(4)
    lower = a.tril() + 100 * torch.ones(4, 4).triu(1)  # garbage above the diagonal
    torch.testing.assert_close(torch.linalg.eigvalsh(lower.to("tpu")).cpu(), torch.linalg.eigvalsh(a), atol=1e-5,
                               rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_svd(mode, shape):
    a = torch.randn(*shape, generator=gen())
    # Sign-invariant outputs: S and U diag(S) V^T's rank-1 terms; gradients through them.
    def fn(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        return s, (u.unsqueeze(-1) * vh.unsqueeze(-3)).mT  # per singular value j: u_j v_j^T
    check_fn(fn, a)
    check_fn(torch.linalg.svdvals, a)
    for full in (False, True):
        u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full)
        k = s.shape[-1]
        torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2) @ vh[..., :k, :]).cpu(), a, atol=1e-5, rtol=1e-5)
        for q in (u, vh.mT):
            torch.testing.assert_close((q.mT @ q).cpu(), torch.eye(q.shape[-1]).expand((q.mT @ q).shape), atol=1e-5,
                                       rtol=0)


def test_svd_rank_deficient_and_full_matrices(mode):
    a = torch.randn(6, 2, generator=gen()) @ torch.randn(2, 4, generator=gen(1))  # rank 2
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=True)
    assert u.shape == (6, 6) and vh.shape == (4, 4)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close((u.mT @ u).cpu(), torch.eye(6), atol=1e-5, rtol=0)
    torch.testing.assert_close((vh @ vh.mT).cpu(), torch.eye(4), atol=1e-5, rtol=0)
    torch.testing.assert_close((u[:, :4] * s @ vh).cpu(), a, atol=1e-5, rtol=1e-5)
    assert torch.linalg.matrix_rank(a.to("tpu")).item() == 2


def test_pinv_matrix_norm_rank(mode):
    a = torch.randn(5, 3, generator=gen())
    check_fn(torch.linalg.pinv, a)
    check_fn(lambda a: torch.linalg.matrix_norm(a, ord=2), a)
    check_fn(lambda a: torch.linalg.matrix_norm(a, ord="nuc"), a)
    check_fn(lambda a: torch.linalg.cond(a), a)
    assert torch.linalg.matrix_rank(a.to("tpu")).item() == torch.linalg.matrix_rank(a).item()


@pytest.mark.parametrize("driver", [None, "gels", "gelsd"])
def test_lstsq(mode, driver):
    a, b = torch.randn(2, 6, 3, generator=gen()), torch.randn(2, 6, 2, generator=gen(1))
    t = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
    c = torch.linalg.lstsq(a, b, driver=driver)
    r = torch.linalg.lstsq(a.double(), b.double(), driver=driver)
    for name in ("solution", "residuals", "singular_values"):
        x, y, z = getattr(t, name), getattr(c, name), getattr(r, name)
        assert x.shape == y.shape, name
        if y.numel():
            assert_as_accurate(x, y, z, name)
    assert torch.equal(t.rank.cpu(), c.rank)
    check_fn(lambda a, b: torch.linalg.lstsq(a, b, driver=driver).solution, a, b)
    v = torch.randn(6, generator=gen(2))
    torch.testing.assert_close(torch.linalg.lstsq(a[0].to("tpu"), v.to("tpu").unsqueeze(-1)).solution.cpu(),
                               torch.linalg.lstsq(a[0], v.unsqueeze(-1)).solution, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_matrix_exp(mode, scale):
    a = torch.randn(2, 4, 4, generator=gen()) * scale
    check_fn(torch.linalg.matrix_exp, a)
    check_fn(torch.linalg.matrix_exp, a[0, :1, :1])


def test_bad_input(mode):
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigh(torch.randn(3, 4, device="tpu"))
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        torch.linalg.qr(torch.randn(3, 4, device="tpu"), mode="full")
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.svd(torch.randn(3, device="tpu"))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_geqrf_householder_product_ormqr(mode, shape):
    a = torch.randn(*shape, generator=gen())
    check_fn(torch.geqrf, a, grad=False)
    qr, tau = torch.geqrf(a)
    m, n = shape[-2:]
    if m >= n:
        check_fn(torch.linalg.householder_product, qr, tau)
    c = torch.randn(*shape[:-2], m, 2, generator=gen(1))
    for left, transpose in [(True, False), (True, True)]:
        check_fn(lambda q, t, c: torch.ormqr(q, t, c, left, transpose), qr, tau, c, grad=False)
    cr = torch.randn(*shape[:-2], 2, m, generator=gen(2))
    check_fn(lambda q, t, c: torch.ormqr(q, t, c, False, True), qr, tau, cr, grad=False)


# ---- ldl_factor / ldl_solve (Bunch-Kaufman, LAPACK sytrf / sytrs) --------------------------------------------

def ldl_input(batch, n, seed, kind):
    a = torch.randn(*batch, n, n, generator=gen(seed))
    if kind == "spd":
        return a @ a.mT + n * torch.eye(n)
    a = a + a.mT
    if kind == "singular":  # a zero first row and column: info = 1, that column is skipped
        a[..., 0, :] = 0
        a[..., :, 0] = 0
    return a


def check_ldl(a):
    """LD and pivots as CPU's (pivots exactly: the same 1x1/2x2 blocks and interchanges), and the solve."""
    LD, piv, info = torch.linalg.ldl_factor_ex(a)
    LD64, piv64, _ = torch.linalg.ldl_factor_ex(a.double())
    assert torch.equal(piv, piv64), "the float32 and float64 CPU pivots differ: pick another seed"
    LDt, pivt, infot = torch.linalg.ldl_factor_ex(a.to("tpu"))
    assert pivt.dtype == infot.dtype == torch.int32 and pivt.device.type == "tpu"
    assert torch.equal(pivt.cpu(), piv), (pivt.cpu(), piv)
    assert torch.equal(infot.cpu(), info)
    assert_as_accurate(LDt, LD, LD64, "LD")
    assert bool((LDt.cpu().triu(1) == 0).all())
    rhs = torch.randn(*a.shape[:-1], 3, generator=gen(5))
    if bool((info == 0).all()):
        X = torch.linalg.ldl_solve(LD, piv, rhs)
        X64 = torch.linalg.ldl_solve(LD64, piv64, rhs.double())
        assert_as_accurate(torch.linalg.ldl_solve(LDt, pivt, rhs.to("tpu")), X, X64, "ldl_solve")
    return piv


@pytest.mark.parametrize("batch,n", [((), 1), ((2, 2), 5)])
def test_ldl_factor_spd_has_no_interchanges(mode, batch, n):
    piv = check_ldl(ldl_input(batch, n, 0, "spd"))
    assert torch.equal(piv, torch.arange(1, n + 1, dtype=torch.int32).expand(piv.shape))


@pytest.mark.parametrize("batch,n,seed", [((4,), 5, 2), ((2, 3), 7, 3)])
def test_ldl_factor_indefinite(mode, batch, n, seed):
    piv = check_ldl(ldl_input(batch, n, seed, "indefinite"))
    if batch:  # these seeds give interchanges and 2x2 blocks (negative pivots), different per matrix
        assert bool((piv < 0).any()) and bool((piv != torch.arange(1, n + 1, dtype=torch.int32)).any())


def test_ldl_factor_two_by_two_block_and_zero_pivot(mode):
    check_ldl(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # a 2x2 block only: pivots [-2, -2]
    check_ldl(torch.tensor([[1e-3, 2.0, 0.5], [2.0, 1e-3, 1.0], [0.5, 1.0, 3.0]]))
    check_ldl(ldl_input((2,), 4, 4, "singular"))
    LD, piv, info = torch.linalg.ldl_factor_ex(torch.zeros(3, 3, device="tpu"))
    assert info.item() == 1 and torch.equal(piv.cpu(), torch.tensor([1, 2, 3], dtype=torch.int32))
    with pytest.raises(RuntimeError):
        torch.linalg.ldl_factor_ex(torch.zeros(3, 3, device="tpu"), check_errors=True)


def test_ldl_solve_broadcasts_and_out(mode):
    a = ldl_input((), 4, 6, "indefinite")
    LD, piv = torch.linalg.ldl_factor(a)
    LDt, pivt = torch.linalg.ldl_factor(a.to("tpu"))
    rhs = torch.randn(3, 4, 2, generator=gen(8))
    X = torch.linalg.ldl_solve(LD, piv, rhs)
    ref = torch.linalg.ldl_solve(LD.double(), piv, rhs.double())
    assert_as_accurate(torch.linalg.ldl_solve(LDt, pivt, rhs.to("tpu")), X, ref, "broadcast B")
    out = torch.empty(0, device="tpu")
    torch.linalg.ldl_solve(LDt, pivt, rhs[0].to("tpu"), out=out)
    assert_as_accurate(out, X[0], ref[0], "out=")
    LDo, pivo = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.int32, device="tpu")
    torch.linalg.ldl_factor(a.to("tpu"), out=(LDo, pivo))
    assert torch.equal(pivo.cpu(), piv)
    assert torch.linalg.ldl_factor_ex(torch.randn(0, 3, 3, device="tpu")).LD.shape == (0, 3, 3)


def test_ldl_bad_input(mode):
    with pytest.raises(RuntimeError, match="square matrices"):
        torch.linalg.ldl_factor(torch.randn(2, 3, device="tpu"))
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.ldl_factor(torch.ones(3, 3, dtype=torch.int64, device="tpu"))
    LD, piv = torch.linalg.ldl_factor(ldl_input((), 3, 0, "spd").to("tpu"))
    with pytest.raises(RuntimeError, match="pivots"):
        torch.linalg.ldl_solve(LD, piv[:2], torch.randn(3, 1, device="tpu"))
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
        torch.linalg.ldl_solve(LD, piv, torch.randn(4, 1, device="tpu"))
