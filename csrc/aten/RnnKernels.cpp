// Fused LSTM / GRU cells and their backwards: the ops at::lstm / at::gru / lstm_cell / gru_cell call for
// a PrivateUse1 device (RNN.cpp takes the fused path for cuda, xpu and privateuse1). One program per cell
// step; the gate matmuls before it are ordinary tpu ops. float16/bfloat16 compute in float32, as CUDA's
// accscalar_t.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Rnn.h"

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;
bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

void checkCell(const char* op, const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& prev, int64_t gates,
               const OptTensor& bi, const OptTensor& bh) {
  TORCH_CHECK(ig.dim() == 2 && hg.dim() == 2 && prev.dim() == 2, op,
              ": expected 2-D input_gates, hidden_gates and state, got ", ig.sizes(), ", ", hg.sizes(), ", ",
              prev.sizes());
  TORCH_CHECK(ig.sizes() == hg.sizes(), op, ": input_gates ", ig.sizes(), " and hidden_gates ", hg.sizes(),
              " must have the same size");
  TORCH_CHECK(ig.size(0) == prev.size(0) && ig.size(1) == gates * prev.size(1), op, ": gates ", ig.sizes(),
              " do not match the state ", prev.sizes(), " (expected (B, ", gates, " * H))");
  TORCH_CHECK(has(bi) == has(bh), op, ": input_bias and hidden_bias must be both defined or both undefined");
  if (has(bi)) {
    TORCH_CHECK(bi->dim() == 1 && bh->dim() == 1 && bi->size(0) == ig.size(1) && bh->size(0) == ig.size(1), op,
                ": biases must be 1-D of size ", ig.size(1), ", got ", bi->sizes(), " and ", bh->sizes());
  }
  TORCH_CHECK(ig.scalar_type() == hg.scalar_type() && ig.scalar_type() == prev.scalar_type(), op,
              ": all tensors must have the same dtype, got ", ig.scalar_type(), ", ", hg.scalar_type(), ", ",
              prev.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(const at::Tensor& ig, const at::Tensor& hg,
                                                        const at::Tensor& cx, const OptTensor& bi,
                                                        const OptTensor& bh) {
  checkCell("_thnn_fused_lstm_cell", ig, hg, cx, 4, bi, bh);
  at::Tensor hy = at::empty(cx.sizes(), cx.options()), cy = at::empty(cx.sizes(), cx.options());
  at::Tensor ws = at::empty(ig.sizes(), ig.options());
  if (ig.numel() == 0) return {hy, cy, ws};
  bool bias = has(bi);
  hlo::DType ct = toHlo(opmathType(ig.scalar_type()));
  Op op = TPU_OP("_thnn_fused_lstm_cell");
  op.in(ig).in(hg).in(cx);
  if (bias) op.in(*bi).in(*bh);
  op.attr(bias).attr(static_cast<int64_t>(ct)).out(hy).out(cy).out(ws).run(
      [&](hlo::Builder& b, Values in, Values) {
        auto c = [&](int i) { return b.convert(in[i], ct); };
        hlo::Value v3, v4;
        if (bias) v3 = c(3), v4 = c(4);
        return lowering::lstmCell(b, c(0), c(1), c(2), bias ? &v3 : nullptr, bias ? &v4 : nullptr);
      });
  return {hy, cy, ws};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(const OptTensor& ghy, const OptTensor& gcy,
                                                                const at::Tensor& cx, const at::Tensor& cy,
                                                                const at::Tensor& ws, bool hasBias) {
  if (!has(ghy) && !has(gcy)) return {};
  TORCH_CHECK(cx.dim() == 2 && cy.sizes() == cx.sizes() && ws.dim() == 2 && ws.size(0) == cx.size(0) &&
                  ws.size(1) == 4 * cx.size(1),
              "_thnn_fused_lstm_cell_backward: workspace ", ws.sizes(), " and states ", cx.sizes(), ", ", cy.sizes(),
              " do not match");
  at::Tensor gg = at::empty(ws.sizes(), ws.options()), gcx = at::empty(cx.sizes(), cx.options());
  if (ws.numel() == 0) {
    at::Tensor gb = hasBias ? at::zeros({ws.size(1)}, ws.options()) : at::Tensor();
    return {gg, gcx, gb};
  }
  bool h = has(ghy), c = has(gcy);
  hlo::DType ct = toHlo(opmathType(cx.scalar_type()));
  Op op = TPU_OP("_thnn_fused_lstm_cell_backward_impl");
  if (h) op.in(*ghy);
  if (c) op.in(*gcy);
  op.in(cx).in(cy).in(ws).attr(h).attr(c).attr(static_cast<int64_t>(ct)).out(gg).out(gcx).run(
      [&](hlo::Builder& b, Values in, Values) {
        ValueList v;
        for (const hlo::Value& x : in) v.push_back(b.convert(x, ct));
        size_t k = h + c;
        return lowering::lstmCellBackward(b, h ? &v[0] : nullptr, c ? &v[h] : nullptr, v[k], v[k + 1], v[k + 2]);
      });
  at::Tensor gb = hasBias ? gg.sum(0) : at::Tensor();
  return {gg, gcx, gb};
}

std::tuple<at::Tensor, at::Tensor> gruCell(const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& hx,
                                           const OptTensor& bi, const OptTensor& bh) {
  checkCell("_thnn_fused_gru_cell", ig, hg, hx, 3, bi, bh);
  at::Tensor hy = at::empty(hx.sizes(), hx.options());
  at::Tensor ws = at::empty({hx.size(0), 5 * hx.size(1)}, hx.options());
  if (ig.numel() == 0) return {hy, ws};
  bool bias = has(bi);
  hlo::DType ct = toHlo(opmathType(ig.scalar_type()));
  Op op = TPU_OP("_thnn_fused_gru_cell");
  op.in(ig).in(hg).in(hx);
  if (bias) op.in(*bi).in(*bh);
  op.attr(bias).attr(static_cast<int64_t>(ct)).out(hy).out(ws).run([&](hlo::Builder& b, Values in, Values) {
    auto c = [&](int i) { return b.convert(in[i], ct); };
    hlo::Value v3, v4;
    if (bias) v3 = c(3), v4 = c(4);
    return lowering::gruCell(b, c(0), c(1), c(2), bias ? &v3 : nullptr, bias ? &v4 : nullptr);
  });
  return {hy, ws};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gruCellBackward(const at::Tensor& ghy,
                                                                                      const at::Tensor& ws,
                                                                                      bool hasBias) {
  TORCH_CHECK(ghy.dim() == 2 && ws.dim() == 2 && ws.size(0) == ghy.size(0) && ws.size(1) == 5 * ghy.size(1),
              "_thnn_fused_gru_cell_backward: workspace ", ws.sizes(), " does not match grad_hy ", ghy.sizes());
  int64_t n = ghy.size(0), hs = ghy.size(1);
  at::Tensor gi = at::empty({n, 3 * hs}, ghy.options()), gh = at::empty({n, 3 * hs}, ghy.options());
  at::Tensor ghx = at::empty({n, hs}, ghy.options());
  if (ghy.numel() == 0) {
    at::Tensor z = hasBias ? at::zeros({3 * hs}, ghy.options()) : at::Tensor();
    return {gi, gh, ghx, z, hasBias ? z.clone() : z};
  }
  hlo::DType ct = toHlo(opmathType(ghy.scalar_type()));
  TPU_OP("_thnn_fused_gru_cell_backward").in(ghy).in(ws).attr(static_cast<int64_t>(ct)).out(gi).out(gh).out(ghx)
      .run([&](hlo::Builder& b, Values in, Values) {
        return lowering::gruCellBackward(b, b.convert(in[0], ct), b.convert(in[1], ct));
      });
  at::Tensor gbi = hasBias ? gi.sum(0) : at::Tensor(), gbh = hasBias ? gh.sum(0) : at::Tensor();
  return {gi, gh, ghx, gbi, gbh};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstmCellBackward);
  m.impl("_thnn_fused_gru_cell", gruCell);
  m.impl("_thnn_fused_gru_cell_backward", gruCellBackward);
}

}  // namespace tpu::aten
