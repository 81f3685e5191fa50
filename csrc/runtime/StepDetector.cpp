#include "StepDetector.h"

#include <algorithm>

namespace tpu::runtime {

namespace {
inline void mix(uint64_t& h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

void mixView(uint64_t& h, const TensorArg& a) {
  mix(h, static_cast<uint64_t>(a.view.dtype));
  for (int64_t s : a.view.sizes) mix(h, static_cast<uint64_t>(s));
  for (int64_t s : a.view.strides) mix(h, static_cast<uint64_t>(s));
  mix(h, a.storage->nbytes);
}
// Enough for two repetitions of a step of 8192 ops, whatever the size bound.
constexpr size_t kMinHistory = 16384;
}  // namespace

uint64_t opSignature(const OpCall& call) {
  uint64_t h = static_cast<uint64_t>(call.opId);
  for (int64_t a : call.attrs) mix(h, static_cast<uint64_t>(a));
  for (const TensorArg& a : call.inputs) mixView(h, a);
  mix(h, 0x5eed);
  for (const TensorArg& a : call.outputs) mixView(h, a);
  return h;
}

bool StepDetector::observe(uint64_t signature) {
  if (!pattern_.empty()) {
    if (pattern_[phase_] != signature) {
      reset();  // the stream left its period: back to the size bound
    } else {
      phase_ = (phase_ + 1) % pattern_.size();
      return phase_ % cutEvery_ == 0;
    }
  }
  if (history_.size() >= 2 * capacity_) history_.erase(history_.begin(), history_.end() - static_cast<ptrdiff_t>(capacity_));
  history_.push_back(signature);
  return false;
}

void StepDetector::learn(size_t maxOps) {
  capacity_ = std::max<size_t>(4 * maxOps, kMinHistory);
  if (history_.size() > capacity_)
    history_.erase(history_.begin(), history_.end() - static_cast<ptrdiff_t>(capacity_));
  const size_t n = history_.size();
  // The shortest period p that explains the recent stream: its last two repetitions
  // agree, and so does a bound's worth of ops (a run of identical ops inside a step
  // is not a period).
  for (size_t p = 1; 2 * p <= n; ++p) {
    if (history_[n - 1] != history_[n - 1 - p]) continue;
    size_t need = std::max(p, std::min(maxOps, n - p));
    if (!std::equal(history_.end() - static_cast<ptrdiff_t>(need), history_.end(),
                    history_.end() - static_cast<ptrdiff_t>(need + p)))
      continue;
    // Graphs of whole periods up to the bound (a period longer than the bound is
    // cut into equal parts). The stream is at a cut now, so phase 0 is here.
    size_t reps = std::max<size_t>(1, maxOps / p);
    pattern_.clear();
    for (size_t r = 0; r < reps; ++r) pattern_.insert(pattern_.end(), history_.end() - static_cast<ptrdiff_t>(p), history_.end());
    size_t parts = (pattern_.size() + maxOps - 1) / maxOps;
    cutEvery_ = (pattern_.size() + parts - 1) / parts;
    phase_ = 0;
    history_.clear();
    return;
  }
}

void StepDetector::reset() {
  pattern_.clear();
  phase_ = 0;
  cutEvery_ = 0;
}

}  // namespace tpu::runtime
