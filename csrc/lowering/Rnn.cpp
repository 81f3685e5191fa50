#include "Rnn.h"

#include "Elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using hlo::Value;

// Columns [k*h, (k+1)*h) of a (B, n*h) value.
Value gate(Builder& b, Value x, int64_t k, int64_t h) {
  return b.slice(x, {0, k * h}, {x.shape()[0], (k + 1) * h}, {1, 1});
}
Value sigmoid(Builder& b, Value x) { return b.unary("logistic", x); }
Value tanh(Builder& b, Value x) { return b.unary("tanh", x); }
Value oneMinus(Builder& b, Value x) { return b.sub(b.scalarLike(x, 1.0), x); }
// Gates plus biases, in CUDA's order: (input + hidden) + b_ih + b_hh.
Value addBiases(Builder& b, Value x, const Value* bi, const Value* bh) {
  if (bi) x = b.add(x, broadcastTo(b, *bi, x.shape()));
  if (bh) x = b.add(x, broadcastTo(b, *bh, x.shape()));
  return x;
}

}  // namespace

std::vector<Value> lstmCell(Builder& b, Value ig, Value hg, Value cx, const Value* bi, const Value* bh) {
  int64_t h = cx.shape()[1];
  Value g = addBiases(b, b.add(ig, hg), bi, bh);
  Value i = sigmoid(b, gate(b, g, 0, h)), f = sigmoid(b, gate(b, g, 1, h));
  Value c = tanh(b, gate(b, g, 2, h)), o = sigmoid(b, gate(b, g, 3, h));
  Value cy = b.add(b.mul(f, cx), b.mul(i, c));
  Value hy = b.mul(o, tanh(b, cy));
  Value parts[] = {i, f, c, o};
  return {hy, cy, b.concatenate(parts, 1)};
}

std::vector<Value> lstmCellBackward(Builder& b, const Value* ghy, const Value* gcy, Value cx, Value cy, Value ws) {
  int64_t h = cx.shape()[1];
  Value i = gate(b, ws, 0, h), f = gate(b, ws, 1, h), c = gate(b, ws, 2, h), o = gate(b, ws, 3, h);
  Value tcy = tanh(b, cy);
  Value zero = b.scalarLike(cx, 0.0);
  Value gh = ghy ? *ghy : zero;
  // dL/dcy through hy = o * tanh(cy), plus the incoming grad_cy.
  Value gc = b.mul(b.mul(gh, o), oneMinus(b, b.mul(tcy, tcy)));
  if (gcy) gc = b.add(gc, *gcy);
  Value go = b.mul(b.mul(gh, tcy), b.mul(o, oneMinus(b, o)));
  Value gi = b.mul(b.mul(gc, c), b.mul(i, oneMinus(b, i)));
  Value gf = b.mul(b.mul(gc, cx), b.mul(f, oneMinus(b, f)));
  Value gg = b.mul(b.mul(gc, i), oneMinus(b, b.mul(c, c)));
  Value parts[] = {gi, gf, gg, go};
  return {b.concatenate(parts, 1), b.mul(gc, f)};
}

std::vector<Value> gruCell(Builder& b, Value ig, Value hg, Value hx, const Value* bi, const Value* bh) {
  int64_t h = hx.shape()[1];
  auto biasGate = [&](const Value* bias, int64_t k) -> Value {
    return b.slice(broadcastTo(b, *bias, ig.shape()), {0, k * h}, {ig.shape()[0], (k + 1) * h}, {1, 1});
  };
  auto plus = [&](Value x, const Value* bias, int64_t k) { return bias ? b.add(x, biasGate(bias, k)) : x; };
  Value r = sigmoid(b, plus(plus(b.add(gate(b, ig, 0, h), gate(b, hg, 0, h)), bi, 0), bh, 0));
  Value z = sigmoid(b, plus(plus(b.add(gate(b, ig, 1, h), gate(b, hg, 1, h)), bi, 1), bh, 1));
  Value hn = plus(gate(b, hg, 2, h), bh, 2);
  Value n = tanh(b, b.add(plus(gate(b, ig, 2, h), bi, 2), b.mul(r, hn)));
  Value hy = b.add(n, b.mul(z, b.sub(hx, n)));
  Value parts[] = {r, z, n, hn, hx};
  return {hy, b.concatenate(parts, 1)};
}

std::vector<Value> gruCellBackward(Builder& b, Value ghy, Value ws) {
  int64_t h = ghy.shape()[1];
  Value r = gate(b, ws, 0, h), z = gate(b, ws, 1, h), n = gate(b, ws, 2, h), hn = gate(b, ws, 3, h),
        hx = gate(b, ws, 4, h);
  Value gz = b.mul(b.mul(ghy, b.sub(hx, n)), b.mul(z, oneMinus(b, z)));
  Value ghx = b.mul(ghy, z);
  Value gn = b.mul(b.mul(ghy, oneMinus(b, z)), oneMinus(b, b.mul(n, n)));
  Value ghn = b.mul(gn, r);
  Value gr = b.mul(b.mul(gn, hn), b.mul(r, oneMinus(b, r)));
  Value gi[] = {gr, gz, gn}, gh[] = {gr, gz, ghn};
  return {b.concatenate(gi, 1), b.concatenate(gh, 1), ghx};
}

}  // namespace tpu::lowering
