// CTC loss (_ctc_loss, _ctc_loss_backward, both overloads) composed of tpu ops, CPU's algorithm: the
// alpha (forward) and beta (backward) recursions over time in log space on the extended label sequence
// (blank, l1, blank, ..., blank), batched over (N, 2L + 1); one small set of ops per time step (the same
// programs every step). Gradient: exp(lp) - exp(logsumexp_{s: l'(s) = c}(alpha + beta) + nll - lp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

namespace tpu::aten {
namespace {

struct Ctc {
  int64_t t, n, c, s;      // time, batch, classes, extended length 2 * Lmax + 1
  at::Tensor ext;          // (N, S) extended labels
  at::Tensor skip;         // (N, S) the s - 2 transition is allowed
  at::Tensor valid;        // (N, S) s < 2 L_n + 1
  at::Tensor lpe;          // (T, N, S) log_probs at the extended labels
  std::vector<int64_t> inLen, tgtLen;
};

Ctc prepare(const at::Tensor& lp, const at::Tensor& targets, at::IntArrayRef inLen, at::IntArrayRef tgtLen,
            int64_t blank) {
  TORCH_CHECK(lp.dim() == 3, "ctc_loss: expected log_probs to be 3-D (T, N, C), got ", lp.sizes());
  TORCH_CHECK(at::isFloatingType(lp.scalar_type()), "ctc_loss: log_probs must be floating point, got ",
              lp.scalar_type());
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt,
              "ctc_loss: targets must be int32 or int64, got ", targets.scalar_type());
  Ctc k;
  k.t = lp.size(0), k.n = lp.size(1), k.c = lp.size(2);
  TORCH_CHECK(blank >= 0 && blank < k.c, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(inLen.size()) == k.n, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(tgtLen.size()) == k.n, "target_lengths must be of size batch_size");
  k.inLen = inLen.vec(), k.tgtLen = tgtLen.vec();
  int64_t lmax = 0;
  std::vector<int64_t> gatherIdx;  // per (n, j < lmax): flat position in targets
  std::vector<int64_t> starts(k.n);
  int64_t pos = 0;
  for (int64_t i = 0; i < k.n; ++i) {
    TORCH_CHECK(inLen[i] >= 0 && inLen[i] <= k.t, "Expected input_lengths to have value at most ", k.t, ", but got "
                "value ", inLen[i], " (while checking arguments for ctc_loss_cpu)");
    TORCH_CHECK(tgtLen[i] >= 0, "Expected target_lengths to be non-negative, but got ", tgtLen[i]);
    if (targets.dim() == 1) {
      starts[i] = pos;
      pos += tgtLen[i];
    } else {
      TORCH_CHECK(targets.dim() == 2 && targets.size(0) == k.n && tgtLen[i] <= targets.size(1),
                  "Expected tensor to have size at least ", tgtLen[i], " at dimension 1, but got size ",
                  targets.dim() == 2 ? targets.size(1) : 0, " for argument #2 'targets' (while checking arguments for "
                  "ctc_loss_cpu)");
      starts[i] = i * targets.size(1);
    }
    lmax = std::max(lmax, tgtLen[i]);
  }
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.numel() >= pos, "ctc_loss: targets hold ", targets.numel(), " labels but target_lengths sum "
                "to ", pos);
  }
  k.s = 2 * lmax + 1;
  at::TensorOptions lopt = lp.options().dtype(at::kLong);
  at::Tensor ext;
  std::vector<uint8_t> valid(k.n * k.s);
  if (lmax > 0) {
    for (int64_t i = 0; i < k.n; ++i)
      for (int64_t j = 0; j < lmax; ++j) gatherIdx.push_back(j < tgtLen[i] ? starts[i] + j : 0);
    at::Tensor gi = at::tensor(gatherIdx, at::TensorOptions().dtype(at::kLong)).to(lp.device());
    at::Tensor tgt = targets.reshape({-1}).to(at::kLong).index_select(0, gi).view({k.n, lmax});
    // Interleave: column 2j + 1 = label j, even columns blank.
    at::Tensor blanks = at::full({k.n, lmax}, blank, lopt);
    ext = at::cat({at::stack({blanks, tgt}, 2).view({k.n, 2 * lmax}), at::full({k.n, 1}, blank, lopt)}, 1);
  } else {
    ext = at::full({k.n, 1}, blank, lopt);
  }
  for (int64_t i = 0; i < k.n; ++i)
    for (int64_t s = 0; s < k.s; ++s) valid[i * k.s + s] = s < 2 * tgtLen[i] + 1;
  k.valid = at::from_blob(valid.data(), {k.n, k.s}, at::TensorOptions().dtype(at::kBool)).to(lp.device());
  k.ext = ext;
  at::Tensor odd = (at::arange(k.s, lopt) % 2 == 1).unsqueeze(0);
  if (k.s > 2) {
    at::Tensor differs = ext.narrow(1, 2, k.s - 2) != ext.narrow(1, 0, k.s - 2);
    k.skip = at::cat({at::zeros({k.n, 2}, lopt.dtype(at::kBool)), differs}, 1) & odd;
  } else {
    k.skip = at::zeros({k.n, k.s}, lopt.dtype(at::kBool));
  }
  k.lpe = lp.gather(2, ext.unsqueeze(0).expand({k.t, k.n, k.s}));
  return k;
}

// log(exp(a) + exp(b) + exp(c)) elementwise; -inf where all are -inf.
at::Tensor lse3(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  at::Tensor m = at::maximum(at::maximum(a, b), c);
  at::Tensor none = m == -INFINITY;
  at::Tensor ms = at::where(none, at::zeros({}, m.options()), m);
  // log(0) is never taken (debug mode checks each op): all -inf stays -inf by selection.
  at::Tensor sum = at::where(none, at::ones({}, m.options()), (a - ms).exp() + (b - ms).exp() + (c - ms).exp());
  return at::where(none, m, ms + sum.log());
}

// x shifted right by k along dim 1, -inf filled.
at::Tensor shift(const at::Tensor& x, int64_t k) {
  int64_t s = x.size(1);
  at::Tensor pad = at::full({x.size(0), std::min(k, s)}, -INFINITY, x.options());
  if (k >= s) return pad;
  return at::cat({pad, x.narrow(1, 0, s - k)}, 1);
}
// x shifted left by k along dim 1, -inf filled.
at::Tensor shiftLeft(const at::Tensor& x, int64_t k) {
  int64_t s = x.size(1);
  at::Tensor pad = at::full({x.size(0), std::min(k, s)}, -INFINITY, x.options());
  if (k >= s) return pad;
  return at::cat({x.narrow(1, k, s - k), pad}, 1);
}

std::tuple<at::Tensor, at::Tensor> ctcLoss(const at::Tensor& lp, const at::Tensor& targets, at::IntArrayRef inLen,
                                           at::IntArrayRef tgtLen, int64_t blank, bool zeroInfinity) {
  Ctc k = prepare(lp, targets, inLen, tgtLen, blank);
  at::Tensor ninf = at::full({}, -INFINITY, lp.options());
  at::Tensor alphaAll = at::full({k.t, k.n, k.s}, -INFINITY, lp.options());
  if (k.t > 0) {
    at::Tensor first = at::arange(k.s, k.ext.options()).unsqueeze(0) < 2;
    at::Tensor a = at::where(first & k.valid, k.lpe.select(0, 0), ninf);
    std::vector<at::Tensor> steps{a};
    for (int64_t t = 1; t < k.t; ++t) {
      at::Tensor skip2 = at::where(k.skip, shift(a, 2), ninf);
      a = at::where(k.valid, lse3(a, shift(a, 1), skip2) + k.lpe.select(0, t), ninf);
      steps.push_back(a);
    }
    alphaAll = at::stack(steps, 0);
  }
  // nll_n = -logsumexp(alpha[T_n - 1, 2 L_n], alpha[T_n - 1, 2 L_n - 1]).
  std::vector<int64_t> ti(k.n), s1(k.n), s2(k.n);
  std::vector<uint8_t> emptyIn(k.n);
  for (int64_t i = 0; i < k.n; ++i) {
    ti[i] = std::max<int64_t>(k.inLen[i] - 1, 0);
    s1[i] = 2 * k.tgtLen[i];
    s2[i] = std::max<int64_t>(2 * k.tgtLen[i] - 1, 0);
    emptyIn[i] = k.inLen[i] == 0;
  }
  auto dev = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(lp.device());
  };
  at::Tensor batch = at::arange(k.n, k.ext.options());
  at::Tensor alphaT = alphaAll.permute({1, 0, 2});  // (N, T, S)
  at::Tensor tI = dev(ti);
  at::Tensor e1 = alphaT.index({batch, tI, dev(s1)}), e2 = alphaT.index({batch, tI, dev(s2)});
  std::vector<uint8_t> hasLabel(k.n);
  for (int64_t i = 0; i < k.n; ++i) hasLabel[i] = k.tgtLen[i] > 0;
  at::Tensor lab = at::from_blob(hasLabel.data(), {k.n}, at::TensorOptions().dtype(at::kBool)).to(lp.device());
  at::Tensor noIn = at::from_blob(emptyIn.data(), {k.n}, at::TensorOptions().dtype(at::kBool)).to(lp.device());
  e2 = at::where(lab, e2, ninf);
  at::Tensor zero = at::zeros({}, lp.options());
  at::Tensor nll = -lse3(e1, e2, ninf.expand({k.n}));
  // No input frames: loss 0 for an empty target, else infinite.
  nll = at::where(noIn, at::where(lab, -ninf, zero), nll);
  if (zeroInfinity) nll = at::where(nll == INFINITY, zero, nll);
  return {nll, alphaT.contiguous()};
}

at::Tensor ctcLossBackward(const at::Tensor& grad, const at::Tensor& lp, const at::Tensor& targets,
                           at::IntArrayRef inLen, at::IntArrayRef tgtLen, const at::Tensor& nll,
                           const at::Tensor& logAlpha, int64_t blank, bool zeroInfinity) {
  Ctc k = prepare(lp, targets, inLen, tgtLen, blank);
  at::Tensor ninf = at::full({}, -INFINITY, lp.options());
  if (k.t == 0) return at::zeros_like(lp);
  // Per (n): last frame T_n - 1 and the two final states 2 L_n, 2 L_n - 1.
  std::vector<int64_t> lastT(k.n);
  for (int64_t i = 0; i < k.n; ++i) lastT[i] = k.inLen[i] - 1;
  at::Tensor last = at::tensor(lastT, at::TensorOptions().dtype(at::kLong)).to(lp.device()).unsqueeze(1);
  at::Tensor sIdx = at::arange(k.s, k.ext.options()).unsqueeze(0);
  std::vector<int64_t> lv(k.n);
  for (int64_t i = 0; i < k.n; ++i) lv[i] = 2 * k.tgtLen[i];
  at::Tensor lastS = at::tensor(lv, at::TensorOptions().dtype(at::kLong)).to(lp.device()).unsqueeze(1);
  at::Tensor finals = (sIdx == lastS) | ((sIdx == lastS - 1) & (lastS > 0));
  std::vector<at::Tensor> betas(k.t);
  at::Tensor b = at::full({k.n, k.s}, -INFINITY, lp.options());
  for (int64_t t = k.t - 1; t >= 0; --t) {
    at::Tensor lpe = k.lpe.select(0, t);
    at::Tensor rec = lse3(b, shiftLeft(b, 1), at::where(shiftLeft(k.skip, 2), shiftLeft(b, 2), ninf)) + lpe;
    at::Tensor init = at::where(finals, lpe, ninf);
    b = at::where(last == t, init, at::where(last > t, rec, ninf));
    b = at::where(k.valid, b, ninf);
    betas[t] = b;
  }
  at::Tensor beta = at::stack(betas, 0);                  // (T, N, S)
  at::Tensor ab = logAlpha.permute({1, 0, 2}) + beta;     // (T, N, S)
  at::Tensor m = ab.amax(2, true);
  at::Tensor ms = at::where(m == -INFINITY, at::zeros({}, m.options()), m);
  at::Tensor sums = at::zeros({k.t, k.n, k.c}, lp.options())
                        .scatter_add(2, k.ext.unsqueeze(0).expand({k.t, k.n, k.s}), (ab - ms).exp());
  at::Tensor absent = sums == 0;
  at::Tensor lcab = at::where(absent, at::full({}, -INFINITY, lp.options()),
                              at::where(absent, at::ones({}, lp.options()), sums).log() + ms);
  at::Tensor nl = nll.view({1, k.n, 1});
  at::Tensor g = (lp.exp() - (lcab + nl - lp).exp()) * grad.view({1, k.n, 1});
  at::Tensor frames = at::arange(k.t, k.ext.options()).view({k.t, 1, 1}) < last.view({1, k.n, 1}) + 1;
  at::Tensor keep = frames;
  if (zeroInfinity) keep = keep & (nl != INFINITY);
  return at::where(keep, g, at::zeros({}, lp.options()));
}

std::vector<int64_t> hostLengths(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU).to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}
std::tuple<at::Tensor, at::Tensor> ctcLossTensor(const at::Tensor& lp, const at::Tensor& targets,
                                                 const at::Tensor& inLen, const at::Tensor& tgtLen, int64_t blank,
                                                 bool zeroInfinity) {
  return ctcLoss(lp, targets, hostLengths(inLen), hostLengths(tgtLen), blank, zeroInfinity);
}
at::Tensor ctcLossBackwardTensor(const at::Tensor& grad, const at::Tensor& lp, const at::Tensor& targets,
                                 const at::Tensor& inLen, const at::Tensor& tgtLen, const at::Tensor& nll,
                                 const at::Tensor& logAlpha, int64_t blank, bool zeroInfinity) {
  return ctcLossBackward(grad, lp, targets, hostLengths(inLen), hostLengths(tgtLen), nll, logAlpha, blank,
                         zeroInfinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", ctcLoss);
  m.impl("_ctc_loss.Tensor", ctcLossTensor);
  m.impl("_ctc_loss_backward", ctcLossBackward);
  m.impl("_ctc_loss_backward.Tensor", ctcLossBackwardTensor);
}

}  // namespace tpu::aten
