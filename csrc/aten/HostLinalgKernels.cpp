// Linear algebra computed by the host's LAPACK: the eigendecomposition of general (non-symmetric) matrices,
// linalg_eig / linalg_eigvals. This is the op's own strategy, not the generic CPU fallback (which stays off):
// it is what CUDA does. PyTorch's CUDA linalg_eig_kernel (aten/src/ATen/native/cuda/linalg/
// BatchLinearAlgebra.cpp, linalg_eig_magma / apply_linalg_eig) copies the input to a CPU tensor, runs MAGMA's
// geev there (a host routine: MAGMA has no device interface for it) and copies the results back; the docs say
// torch.linalg.eig "synchronizes that device with the CPU" for CUDA inputs. geev's eigenvalue order (the
// deflation order of the Hessenberg QR iteration) and its eigenvector normalisation (unit 2-norm, largest
// component real) are LAPACK's choices, which an HLO iteration would not reproduce. So here: one synchronizing
// read of the input, CPU's kernel (exactly CPU's values, checks and messages by construction), and one upload
// of the complex eigenvalues / eigenvectors. Gradients are PyTorch's linalg_eig_backward on the tpu outputs.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

// Every check (finite values, then dtype, then shape, in CPU's order and words) is CPU's own, on the downloaded
// input; only the out tensors' device is checked here, since CPU's kernel sees CPU stand-ins for them.

// A CPU tensor of `like`'s dtype for CPU's out= kernel, so that it applies its own dtype checks.
at::Tensor hostLike(const at::Tensor& like) { return at::empty({0}, like.options().device(at::kCPU)); }

void upload(const at::Tensor& host, at::Tensor& out) {
  at::native::resize_output(out, host.sizes());
  out.copy_(host);
}

std::tuple<at::Tensor&, at::Tensor&> eigOut(const at::Tensor& a, at::Tensor& values, at::Tensor& vectors) {
  at::native::checkSameDevice("torch.linalg.eig", values, a, "eigenvalues");
  at::native::checkSameDevice("torch.linalg.eig", vectors, a, "eigenvectors");
  at::Tensor w = hostLike(values), v = hostLike(vectors);
  at::linalg_eig_out(w, v, a.cpu());
  upload(w, values);
  upload(v, vectors);
  return {values, vectors};
}

std::tuple<at::Tensor, at::Tensor> eig(const at::Tensor& a) {
  auto [w, v] = at::linalg_eig(a.cpu());
  return {w.to(a.device()), v.to(a.device())};
}

at::Tensor& eigvalsOut(const at::Tensor& a, at::Tensor& values) {
  at::native::checkSameDevice("torch.linalg.eigvals", values, a, "eigenvalues");
  at::Tensor w = hostLike(values);
  at::linalg_eigvals_out(w, a.cpu());
  upload(w, values);
  return values;
}

// What linalg_eigvals calls when no gradient is needed (CPU's _linalg_eigvals: eigenvalues only, jobvr = 'N').
at::Tensor eigvals(const at::Tensor& a) {
  return at::_linalg_eigvals(a.cpu()).to(a.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eig", eig);
  m.impl("linalg_eig.out", eigOut);
  m.impl("_linalg_eigvals", eigvals);
  m.impl("linalg_eigvals.out", eigvalsOut);
}

}  // namespace tpu::aten
