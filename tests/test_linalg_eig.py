"""torch.linalg.eig / eigvals on tpu (csrc/aten/HostLinalgKernels.cpp) against CPU, and the complex LU, solve, inv,
det and slogdet on tpu (csrc/lowering/Linalg.cpp; solve is what the eig gradient needs).

The eigendecomposition runs CPU's LAPACK geev on the downloaded input, as CUDA runs MAGMA's geev on the host, so
values, order and eigenvector normalisation must equal CPU's bit for bit, and errors must be CPU's (type and
message). Gradients are PyTorch's linalg_eig_backward on tpu (complex matmul, complex linalg.solve): they must be
as close to a float64 CPU reference as CPU float32 is (4x CPU's largest error plus 1e-5, the OpInfo harness's
rule)."""
import pytest
import torch
from conftest import nonfinite_ok

CPU_ERROR_FACTOR = 4
RTOL = ATOL = 1e-5


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def assert_same(actual, expected):
    assert actual.device.type == "tpu", f"result is on {actual.device}"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def assert_as_accurate(actual, cpu, ref, what=""):
    assert actual.device.type == "tpu", f"{what}: result is on {actual.device}"
    a, e, r = actual.detach().cpu(), cpu.detach(), ref.detach()
    a, e, r = (x.to(torch.complex128 if x.is_complex() else torch.float64) for x in (a, e, r))
    assert a.shape == e.shape == r.shape, f"{what}: {a.shape} {e.shape} {r.shape}"
    bound = CPU_ERROR_FACTOR * (e - r).abs().max() + ATOL + RTOL * r.abs()
    err = (a - r).abs()
    assert bool((err <= bound).all()), f"{what}: tpu error {err.max():.3g}, CPU float32 error {(e - r).abs().max():.3g}"


def check_eig(a):
    w, v = torch.linalg.eig(a)
    tw, tv = torch.linalg.eig(a.to("tpu"))
    assert_same(tw, w)
    assert_same(tv, v)
    assert_same(torch.linalg.eigvals(a.to("tpu")), torch.linalg.eigvals(a))
    return tw, tv


MATRICES = {
    "1x1": lambda g: torch.randn(1, 1, generator=g),
    "random5": lambda g: torch.randn(5, 5, generator=g),
    "batched": lambda g: torch.randn(2, 3, 4, 4, generator=g),
    # A rotation block: eigenvalues +-i; with a random similarity, complex pairs mixed with real eigenvalues.
    "conjugate_pairs": lambda g: (lambda s: s @ torch.block_diag(torch.tensor([[0.0, -2.0], [2.0, 0.0]]),
                                                                 torch.tensor([[1.0, 3.0], [-3.0, 1.0]]),
                                                                 torch.tensor([[0.5]])) @ torch.linalg.inv(s))(
        torch.randn(5, 5, generator=g) + 3 * torch.eye(5)),
    # Defective (a Jordan block: one eigenvector for a double eigenvalue) and repeated (the identity).
    "defective": lambda g: torch.tensor([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 2.0]]),
    "repeated": lambda g: torch.eye(4),
    "symmetric": lambda g: (lambda x: x + x.mT)(torch.randn(4, 4, generator=g)),
    "triangular": lambda g: torch.randn(4, 4, generator=g).triu(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(MATRICES))
def test_eig_matches_cpu(mode, name, dtype):
    a = MATRICES[name](gen()).to(dtype)
    tw, tv = check_eig(a)
    if name == "conjugate_pairs":
        assert int((tw.cpu().imag.abs() > 1).sum()) == 4  # two conjugate pairs, as constructed
    # The decomposition holds when checked with tpu ops: A V = V diag(w).
    at = a.to("tpu").to(tv.dtype)
    resid = (at @ tv - tv * tw.unsqueeze(-2)).abs().max().item()
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    if name != "defective":  # a defective matrix's computed eigenvectors are nearly parallel: no small residual
        assert resid <= tol * max(1.0, a.abs().max().item()) * a.shape[-1]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_eig_complex_input(mode, dtype):
    a = torch.randn(2, 4, 4, dtype=dtype, generator=gen(1))
    check_eig(a)


def test_eig_non_contiguous_and_empty(mode):
    a = torch.randn(2, 5, 5, generator=gen(2))
    check_eig(a.mT)  # a transposed view
    check_eig(a[:, ::2, ::2])  # a strided view
    for shape in [(0, 3, 3), (2, 0, 0), (0, 0)]:
        check_eig(torch.randn(shape))


def test_eig_out(mode):
    a = torch.randn(3, 3, generator=gen(3))
    w, v = torch.linalg.eig(a)
    tw = torch.empty(0, dtype=torch.complex64, device="tpu")
    tv = torch.empty(0, dtype=torch.complex64, device="tpu")
    r = torch.linalg.eig(a.to("tpu"), out=(tw, tv))
    assert r[0] is tw and r[1] is tv
    assert_same(tw, w)
    assert_same(tv, v)
    # A wider complex dtype is a safe cast, as on CPU.
    tw2 = torch.empty(0, dtype=torch.complex128, device="tpu")
    torch.linalg.eigvals(a.to("tpu"), out=tw2)
    assert_same(tw2, torch.linalg.eigvals(a, out=torch.empty(0, dtype=torch.complex128)))


def same_error(fn_cpu, fn_tpu):
    with pytest.raises(Exception) as cpu_err:
        fn_cpu()
    with pytest.raises(type(cpu_err.value)) as tpu_err:
        fn_tpu()
    assert str(tpu_err.value) == str(cpu_err.value)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")  # CPU's half input path
@pytest.mark.parametrize("fn", [torch.linalg.eig, torch.linalg.eigvals])
def test_eig_errors(mode, fn):
    nan = float("nan")
    bad = [torch.randn(2, 3), torch.randn(3), torch.tensor([[1.0, nan], [0.0, 1.0]]),
           torch.ones(2, 2, dtype=torch.long), torch.ones(2, 2, dtype=torch.half)]
    for a in bad:
        if fn is torch.linalg.eigvals and not bool(a.isfinite().all()):
            continue  # CPU's eigvals does not check: LAPACK returns NaNs (below)
        same_error(lambda: fn(a), lambda: fn(a.to("tpu")))
    # Out tensors of a real dtype cannot hold complex results; out tensors must be on the input's device.
    a = torch.randn(2, 2)
    if fn is torch.linalg.eig:
        same_error(lambda: fn(a, out=(torch.empty(0), torch.empty(0))),
                   lambda: fn(a.to("tpu"), out=(torch.empty(0, device="tpu"), torch.empty(0, device="tpu"))))
        with pytest.raises(RuntimeError, match="Expected eigenvalues and input tensors to be on the same device"):
            fn(a.to("tpu"), out=(torch.empty(0, dtype=torch.complex64), torch.empty(0, dtype=torch.complex64)))
    else:
        same_error(lambda: fn(a, out=torch.empty(0)), lambda: fn(a.to("tpu"), out=torch.empty(0, device="tpu")))
        with pytest.raises(RuntimeError, match="Expected eigenvalues and input tensors to be on the same device"):
            fn(a.to("tpu"), out=torch.empty(0, dtype=torch.complex64))


def test_eigvals_of_non_finite_input_is_cpus(mode):
    a = torch.tensor([[1.0, float("inf")], [0.0, 1.0]])
    assert_same(torch.linalg.eigvals(a.to("tpu")), torch.linalg.eigvals(a))


# ---- gradients: linalg_eig_backward on tpu (complex matmul and linalg.solve) --------------------------------

def run_grad(fn, a, device, dtype, cots):
    x = a.detach().to(device=device, dtype=dtype, copy=True).requires_grad_(True)
    outs = fn(x)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    cs = [c.to(device=device, dtype=o.dtype) for o, c in zip(outs, cots)]
    return outs, torch.autograd.grad(outs, [x], cs)[0]


def eig_invariants(a):
    # The eigenvalues and |V_ij|^2: eigenvectors are defined up to a phase per column, so a loss of V itself
    # is ill-defined (linalg_eig_backward rejects it, on CPU too).
    w, v = torch.linalg.eig(a)
    return w, (v * v.conj()).real


@pytest.mark.parametrize("fn", [eig_invariants, torch.linalg.eigvals], ids=["eig", "eigvals"])
@pytest.mark.parametrize("name", ["random5", "conjugate_pairs", "batched", "complex"])
def test_eig_grad(mode, fn, name):
    a = cplx(2, 4, 4, seed=12) if name == "complex" else MATRICES[name](gen(4)).double()
    lo, hi = (torch.complex64, torch.complex128) if a.is_complex() else (torch.float32, torch.float64)
    a = a.to(lo).to(hi)  # exactly representable at both precisions
    outs64 = fn(a)
    outs64 = list(outs64) if isinstance(outs64, (tuple, list)) else [outs64]
    cots = [torch.randn(o.shape, dtype=o.dtype, generator=gen(7)) for o in outs64]
    (t_outs, t_g), (c_outs, c_g), (r_outs, r_g) = (run_grad(fn, a, d, dt, cots) for d, dt in
                                                   [("tpu", lo), ("cpu", lo), ("cpu", hi)])
    # Same eigenvalue order at both precisions, so the reference is a reference.
    torch.testing.assert_close(c_outs[0].to(torch.complex128), r_outs[0], rtol=1e-4, atol=1e-4)
    assert_same(t_outs[0].detach(), c_outs[0].detach())  # eigenvalues: CPU's; |V|^2 is computed by tpu ops
    for t, c, r in zip(t_outs[1:], c_outs[1:], r_outs[1:]):
        assert_as_accurate(t, c, r, "|V|^2")
    assert_as_accurate(t_g, c_g, r_g, "grad")


# ---- complex LU, lu_solve, solve, inv (what the gradient solves with) ------------------------------------

def ref_pair(*xs):
    """The inputs at complex64 (cpu and tpu) and complex128 (reference)."""
    return ([x.to(torch.complex64) for x in xs], [x.to(torch.complex64).to("tpu") for x in xs],
            [x.to(torch.complex64).to(torch.complex128) for x in xs])


def cplx(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.complex128, generator=gen(seed))


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (3, 5), (5, 3)])
def test_complex_lu_factor(mode, shape):
    (c,), (t,), (r,) = ref_pair(cplx(*shape, seed=5))
    lu_c, piv_c = torch.linalg.lu_factor(c) if shape[-1] == shape[-2] else torch.linalg.lu_factor_ex(c)[:2]
    lu_t, piv_t = torch.linalg.lu_factor(t) if shape[-1] == shape[-2] else torch.linalg.lu_factor_ex(t)[:2]
    lu_r, piv_r = torch.linalg.lu_factor_ex(r)[:2]
    assert_same(piv_t, piv_c)  # pivots by |re| + |im|, as LAPACK
    assert torch.equal(piv_c, piv_r)
    assert_as_accurate(lu_t, lu_c, lu_r, "LU")
    for k, (pt, pc, pr) in enumerate(zip(torch.linalg.lu(t), torch.linalg.lu(c), torch.linalg.lu(r))):
        assert_as_accurate(pt, pc, pr, "PLU"[k])


def test_complex_lu_pivots_on_cabs1(mode):
    # |re| + |im| picks row 1 (0.9 + 0.9 = 1.8 > 1.5), |z| would pick row 0 (1.5 > 1.27).
    a = torch.tensor([[1.5 + 0.0j, 1.0], [0.9 + 0.9j, 2.0]], dtype=torch.complex64)
    piv = torch.linalg.lu_factor(a)[1]
    assert piv.tolist() == [2, 2]
    assert_same(torch.linalg.lu_factor(a.to("tpu"))[1], piv)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_complex_lu_solve(mode, left, adjoint):
    a, b = cplx(2, 4, 4, seed=6), cplx(2, 4, 3, seed=8) if left else cplx(2, 3, 4, seed=8)
    (ca, cb), (ta, tb), (ra, rb) = ref_pair(a, b)
    outs = [torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, left=left, adjoint=adjoint)
            for x, y in [(ta, tb), (ca, cb), (ra, rb)]]
    assert_as_accurate(*outs, "X")


def test_complex_solve_and_inv(mode):
    a, b, v = cplx(3, 4, 4, seed=9), cplx(3, 4, 2, seed=10), cplx(3, 4, seed=11)
    (ca, cb, cv), (ta, tb, tv), (ra, rb, rv) = ref_pair(a, b, v)
    assert_as_accurate(torch.linalg.solve(ta, tb), torch.linalg.solve(ca, cb), torch.linalg.solve(ra, rb), "solve")
    assert_as_accurate(torch.linalg.solve(ta, tv), torch.linalg.solve(ca, cv), torch.linalg.solve(ra, rv), "vector")
    assert_as_accurate(torch.linalg.solve(ta, tb.mT, left=False), torch.linalg.solve(ca, cb.mT, left=False),
                       torch.linalg.solve(ra, rb.mT, left=False), "left=False")
    # Conjugate views as inputs (what linalg_eig_backward passes: V.mH()).
    assert_as_accurate(torch.linalg.solve(ta.mH, tb), torch.linalg.solve(ca.mH, cb), torch.linalg.solve(ra.mH, rb),
                       "A^H")
    assert_as_accurate(torch.linalg.inv(ta), torch.linalg.inv(ca), torch.linalg.inv(ra), "inv")
    # A singular complex matrix: the same LinAlgError as CPU.
    s = torch.zeros(2, 2, dtype=torch.complex64)
    same_error(lambda: torch.linalg.solve(s, torch.ones(2, 1, dtype=torch.complex64)),
               lambda: torch.linalg.solve(s.to("tpu"), torch.ones(2, 1, dtype=torch.complex64, device="tpu")))


@pytest.mark.parametrize("contiguous", [True, False])
def test_complex_det_slogdet(mode, contiguous):
    a = cplx(2, 4, 4, seed=13)
    a = a if contiguous else a.mT  # CPU factors a contiguous real A as A^T, a complex A as itself
    (ca,), (ta,), (ra,) = ref_pair(a)
    if not contiguous:
        ca, ta, ra = ca.mT.contiguous().mT, ta.mT.contiguous().mT, ra.mT.contiguous().mT
    fns = {"det": torch.linalg.det, "sign": lambda x: torch.linalg.slogdet(x)[0],
           "logabsdet": lambda x: torch.linalg.slogdet(x)[1], "logdet": torch.logdet}
    for what, f in fns.items():
        outs = [f(x) for x in (ta, ca, ra)]
        assert outs[0].dtype == outs[1].dtype  # logabsdet is real, the rest complex
        assert_as_accurate(*outs, what)
        grads = []
        for x in (ta, ca, ra):
            x = x.detach().clone().requires_grad_(True)
            y = f(x)
            cot = torch.randn(y.shape, dtype=torch.complex128 if y.is_complex() else torch.float64, generator=gen(14))
            grads.append(torch.autograd.grad(y, x, cot.to(device=y.device, dtype=y.dtype))[0])
        assert_as_accurate(*grads, f"grad of {what}")
    # Singular: det 0, sign 0, logabsdet -inf, as CPU.
    s = torch.zeros(3, 3, dtype=torch.complex64)
    s[0, 0] = 1j
    with nonfinite_ok():  # log|0| = -inf on purpose
        ts = torch.linalg.slogdet(s.to("tpu"))
    for t, c in zip(ts, torch.linalg.slogdet(s)):
        assert_same(t, c)
    assert_same(torch.linalg.det(s.to("tpu")), torch.linalg.det(s))


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
def test_complex_solve_triangular(mode, upper, left):
    a = cplx(2, 4, 4, seed=15) + 4 * torch.eye(4)
    a = a.triu() if upper else a.tril()
    b = cplx(2, 4, 3, seed=16) if left else cplx(2, 3, 4, seed=16)
    (ca, cb), (ta, tb), (ra, rb) = ref_pair(a, b)
    for unit in [False, True]:
        outs = [torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)
                for x, y in [(ta, tb), (ca, cb), (ra, rb)]]
        assert_as_accurate(*outs, f"solve_triangular unit={unit}")
    outs = [torch.linalg.solve_triangular(x.mH, y, upper=not upper, left=left) for x, y in [(ta, tb), (ca, cb), (ra, rb)]]
    assert_as_accurate(*outs, "conjugate-transposed view")
    if left:
        # torch.triangular_solve's transpose is the plain transpose for complex values too.
        for transpose in [False, True]:
            outs = [torch.triangular_solve(y, x, upper=upper, transpose=transpose).solution
                    for x, y in [(ta, tb), (ca, cb), (ra, rb)]]
            assert_as_accurate(*outs, f"triangular_solve transpose={transpose}")


@pytest.mark.parametrize("upper", [False, True])
def test_complex_cholesky(mode, upper):
    m = cplx(2, 4, 4, seed=17)
    a = m @ m.mH + 4 * torch.eye(4)  # Hermitian positive definite
    b = cplx(2, 4, 3, seed=18)
    (ca, cb), (ta, tb), (ra, rb) = ref_pair(a, b)
    ca, ta, ra = ((x + x.mH) / 2 for x in (ca, ta, ra))  # exactly Hermitian after rounding
    fs = [torch.linalg.cholesky(x, upper=upper) for x in (ta, ca, ra)]
    assert_as_accurate(*fs, "factor")
    assert_as_accurate(*[torch.cholesky_solve(y, f, upper=upper) for y, f in zip((tb, cb, rb), fs)], "cholesky_solve")
    assert_as_accurate(*[torch.cholesky_inverse(f, upper=upper) for f in fs], "cholesky_inverse")
    grads = []
    for x in (ta, ca, ra):
        x = x.detach().clone().requires_grad_(True)
        y = torch.linalg.cholesky(x, upper=upper)
        cot = torch.randn(y.shape, dtype=torch.complex128, generator=gen(19)).to(device=y.device, dtype=y.dtype)
        grads.append(torch.autograd.grad(y, x, cot)[0])
    assert_as_accurate(*grads, "grad of the factor")
    bad = torch.eye(3, dtype=torch.complex64)
    bad[1, 1] = -1
    with pytest.raises(torch.linalg.LinAlgError, match="not positive-definite"):
        with nonfinite_ok():
            torch.linalg.cholesky(bad.to("tpu"), upper=upper)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_info_names_the_failing_minor(mode, dtype, upper):
    # LAPACK's info is the order of the first leading minor that is not positive definite (XLA's cholesky leaves
    # only NaNs; Linalg.cpp's firstFailingMinor finds it). A batch with a good element and failures at 1, 4, 5.
    m = torch.randn(4, 5, 5, generator=gen(20)).to(dtype)
    a = m @ m.mH + 0.1 * torch.eye(5, dtype=dtype)
    a[1, 3, 3], a[2, 0, 0], a[3, 4, 4] = -50, 0, -100
    with nonfinite_ok():
        info = torch.linalg.cholesky_ex(a.to("tpu"), upper=upper).info
    assert_same(info, torch.linalg.cholesky_ex(a, upper=upper).info)
    assert torch.linalg.cholesky_ex(a, upper=upper).info.tolist() == [0, 4, 1, 5]
    with nonfinite_ok():  # the failed elements' factors are NaN
        same_error(lambda: torch.linalg.cholesky(a, upper=upper), lambda: torch.linalg.cholesky(a.to("tpu"), upper=upper))
