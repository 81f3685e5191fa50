#include "FusedReplay.h"

#include <vector>

namespace tpu::runtime {

namespace {
inline void mix(uint64_t& h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }
}  // namespace

uint64_t replaySignature(const OpCall& call, size_t slotsSoFar) {
  uint64_t h = static_cast<uint64_t>(call.opId);
  mix(h, reinterpret_cast<uintptr_t>(call.name));  // names the out-of-range code baked into index ops
  mix(h, call.attrs.size());
  for (int64_t a : call.attrs) mix(h, static_cast<uint64_t>(a));
  for (const HostOperand& o : call.operands) mix(h, static_cast<uint64_t>(o.dtype) * 8 + static_cast<uint64_t>(o.count));
  mix(h, (call.checksIndices ? 1u : 0u) | static_cast<uint64_t>(call.dotPrecision) << 1);
  // Storages new to the graph in this op, in first-touch order (an op may name one twice).
  thread_local std::vector<DeviceStorage*> fresh;
  fresh.clear();
  size_t nIn = call.inputs.size(), nArgs = nIn + call.outputs.size();
  for (size_t j = 0; j < nArgs; ++j) {
    const TensorArg& a = j < nIn ? call.inputs[j] : call.outputs[j - nIn];
    DeviceStorage* s = a.storage;
    const ViewSpec& v = a.view;
    mix(h, static_cast<uint64_t>(v.dtype) | static_cast<uint64_t>(v.sizes.size()) << 8);
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      mix(h, static_cast<uint64_t>(v.sizes[d]));
      mix(h, static_cast<uint64_t>(v.strides[d]));
    }
    bool dynamic = v.offset != 0 &&
                   offsetCanBeOperand(v, static_cast<int64_t>(s->nbytes / hlo::byteWidth(v.dtype)), j >= nIn);
    mix(h, dynamic ? ~uint64_t{0} : static_cast<uint64_t>(v.offset));
    if (s->inGraph) {
      mix(h, static_cast<uint64_t>(s->fusedSlot));
      continue;
    }
    size_t k = 0;
    while (k < fresh.size() && fresh[k] != s) ++k;
    if (k == fresh.size()) fresh.push_back(s);
    mix(h, 0xf0000000ull + slotsSoFar + k);  // the slot it will get
    mix(h, s->nbytes);
    mix(h, s->buffer ? static_cast<uint64_t>(s->elem) + 1 : 0);
  }
  return h;
}

}  // namespace tpu::runtime
