#pragma once
// Fused mode's training-step boundary: finds the period of the op stream (a
// training loop repeats the same op sequence every step) and from then on cuts
// the fused graph at the same phase of every period, so step N+1 builds the
// same module as step N and reuses its executable. Without it, graphs cut only
// by the size bound start at a different op every step and each is new.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "OpCall.h"

namespace tpu::runtime {

// What the stream's period is compared on: the lowering and the views' shapes.
uint64_t opSignature(const OpCall& call);

class StepDetector {
 public:
  // Records one op; true when the graph should be cut after it (a step boundary).
  bool observe(uint64_t signature);
  // The graph was just cut at the size bound `maxOps`: look for a period in the
  // recent stream. Cheap unless the stream really repeats.
  void learn(size_t maxOps);
  // Forget what was learned (a new workload, or the bound changed).
  void reset();
  size_t period() const { return pattern_.size(); }

 private:
  std::vector<uint64_t> history_;  // recent signatures, oldest first (bounded)
  size_t capacity_ = 16384;        // history kept: max(4 size bounds, 16384) signatures
  std::vector<uint64_t> pattern_;  // one period of the stream, starting at a cut
  size_t phase_ = 0;               // position in pattern_ of the next op
  size_t cutEvery_ = 0;            // cut when phase_ is a multiple of this
};

}  // namespace tpu::runtime
