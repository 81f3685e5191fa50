#pragma once
// Fused replay: what one traced fused graph looked like, op by op, so that the next time the
// same op stream comes (the next training step) its ops are checked against the recorded
// signatures and their buffers and operands bound to the recorded program's parameters,
// without running the lowerings, building HLO or hashing module text. Storages are named by
// their position in the graph's first-touch order (a slot), so a step with new activation
// tensors binds the same way. A mismatch resumes tracing where the replay stopped: the builder
// becomes the recorded module's prefix, and the storages' values and parameters are restored
// from the recording and the bound buffers (FusedGraph::resumeTrace), so the graph is the one a
// trace of the whole stream would have built.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "FusedGraph.h"

namespace tpu::runtime {

struct RecordedParam {
  enum class Kind : uint8_t { Storage, Operand, Offset, Flag };
  Kind kind = Kind::Storage;
  int32_t index = 0;  // Storage: slot; Operand: the op's operand; Offset: the op's argument (inputs, then outputs)
};

struct RecordedOp {
  uint64_t signature = 0;  // replaySignature at the op
  uint32_t paramsEnd = 0;  // parameters created up to and including this op
  uint32_t writesEnd = 0;  // storage writes up to and including this op
  size_t bodyEnd = 0;      // builder body length after this op
  int32_t nextId = 0;      // the builder's next SSA number after this op
  std::optional<hlo::Value> flag;  // the out-of-range flag after this op (index ops so far)
};

struct FusedRecording {
  std::vector<RecordedOp> ops;
  std::vector<RecordedParam> params;                       // the builder's parameters, in order
  std::vector<std::pair<int32_t, hlo::Value>> writes;     // (slot, its flat value from here on), in order
  std::unique_ptr<hlo::Builder> builder;                   // the traced module, for prefixes
  CapturedGraph graph;                                     // the program and its parameter/result types
  std::vector<int32_t> resultSlots;                        // the slot each result is written to
};

// Everything tracing `call` into the pending graph depends on, as one hash: the lowering, its
// attributes, the operands' types, every view (offsets only where they are constants of the
// program), and for each storage its slot in the graph or, for one not in the graph yet, its
// size and current buffer type. `order` is the graph's first-touch order so far.
uint64_t replaySignature(const OpCall& call, size_t slotsSoFar);

}  // namespace tpu::runtime
