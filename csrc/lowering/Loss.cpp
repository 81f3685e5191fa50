#include "Loss.h"

#include "Index.h"
#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;
using hlo::DType;

// Per-sample pieces of nll: which class each target picks, and its weight
// (0 where the target is ignored).
struct Picks {
  int64_t classDim;
  Value onehot;  // x-shaped predicate
  Value valid;   // target-shaped predicate
  Value w;       // target-shaped weight
};

std::vector<int64_t> allDims(const Value& v) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < v.rank(); ++i) d.push_back(i);
  return d;
}

Picks picks(Builder& b, Value x, Value target, const Value* weight, Value ignoreIndex) {
  Picks p;
  p.classDim = x.rank() == 1 ? 0 : 1;
  Value t = b.convert(target, DType::S64);
  p.onehot = b.compare(Cmp::EQ, b.iota(hlo::Type{DType::S64, x.shape()}, p.classDim),
                       expandBack(b, t, x.shape(), {p.classDim}));
  p.valid = b.compare(Cmp::NE, t, b.broadcast(ignoreIndex, t.shape()));
  Value w;
  if (weight) {
    Value wx = b.broadcastInDim(*weight, x.shape(), {p.classDim});
    w = reduce(b, ReduceOp::Sum, b.select(p.onehot, wx, b.scalarLike(x, 0)), {p.classDim});
  } else {
    w = b.full(hlo::Type{x.dtype(), t.shape()}, 1);
  }
  p.w = b.select(p.valid, w, b.scalarLike(w, 0));
  return p;
}

}  // namespace

Value nllTargetOutOfRange(Builder& b, Value target, int64_t classes, Value ignoreIndex) {
  Value t = b.convert(target, DType::S64);
  Value outside = b.binary("or", b.compare(Cmp::LT, t, b.scalarLike(t, 0)),
                           b.compare(Cmp::GE, t, b.scalarLike(t, static_cast<double>(classes))));
  Value counted = b.compare(Cmp::NE, t, b.broadcast(ignoreIndex, t.shape()));
  return anyTrue(b, b.binary("and", outside, counted));
}

NllLoss nllLoss(Builder& b, Value x, Value target, const Value* weight, int64_t reduction, Value ignoreIndex) {
  Picks p = picks(b, x, target, weight, ignoreIndex);
  Value picked = reduce(b, ReduceOp::Sum, b.select(p.onehot, x, b.scalarLike(x, 0)), {p.classDim});
  Value loss = b.select(p.valid, b.neg(b.mul(picked, p.w)), b.scalarLike(picked, 0));
  if (reduction == kNone) return {loss, b.constant(x.dtype(), 0)};
  Value total = reduce(b, ReduceOp::Sum, p.w, allDims(p.w));
  Value sum = reduce(b, ReduceOp::Sum, loss, allDims(loss));
  return {reduction == kMean ? b.div(sum, total) : sum, total};
}

Value nllLossBackward(Builder& b, Value gradOut, Value x, Value target, const Value* weight, int64_t reduction,
                      Value ignoreIndex, Value totalWeight) {
  Picks p = picks(b, x, target, weight, ignoreIndex);
  Value g = b.broadcast(reduction == kMean ? b.div(gradOut, totalWeight) : gradOut, p.w.shape());
  Value perSample = b.select(p.valid, b.neg(b.mul(p.w, g)), b.scalarLike(g, 0));
  return b.select(p.onehot, expandBack(b, perSample, x.shape(), {p.classDim}), b.scalarLike(x, 0));
}

Value mseLoss(Builder& b, Value x, Value y, int64_t reduction) {
  Value d = b.sub(x, y);
  Value sq = b.mul(d, d);
  if (reduction == kNone) return sq;
  return reduce(b, reduction == kMean ? ReduceOp::Mean : ReduceOp::Sum, sq, allDims(sq));
}

Value mseLossBackward(Builder& b, Value gradOut, Value x, Value y, int64_t reduction) {
  double scale = reduction == kMean ? 2.0 / static_cast<double>(x.type.numel()) : 2.0;
  Value g = b.broadcast(gradOut, x.shape());
  return b.mul(b.mul(b.scalarLike(x, scale), b.sub(x, y)), g);
}

}  // namespace tpu::lowering
