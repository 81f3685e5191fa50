#pragma once
// A strided view of a DeviceStorage, and the HLO that reads or writes it on
// the storage's flat buffer (DESIGN §3).
#include <cstdint>
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::runtime {

struct ViewSpec {
  hlo::DType dtype = hlo::DType::F32;
  std::vector<int64_t> sizes, strides;  // in elements of dtype
  int64_t offset = 0;                   // in elements of dtype

  int64_t numel() const;
  bool isContiguous() const;
  // True when the view is the whole storage of `storageBytes`, densely.
  bool coversStorage(size_t storageBytes) const;
};

// `flat` (1-D, any element type) reinterpreted as a 1-D array of `to`.
hlo::Value reinterpretFlat(hlo::Builder& b, hlo::Value flat, hlo::DType to);
// The values of `view` gathered from `flat` (1-D of view.dtype). With `offset` (an S64 scalar
// holding view.offset) the offset is that runtime value rather than a constant of the program.
hlo::Value readView(hlo::Builder& b, hlo::Value flat, const ViewSpec& view, const hlo::Value* offset = nullptr);
// `flat` (1-D of view.dtype) with the elements of `view` replaced by `values`.
hlo::Value writeView(hlo::Builder& b, hlo::Value flat, const ViewSpec& view, hlo::Value values,
                     const hlo::Value* offset = nullptr);
// Whether the view's (nonzero) offset can be a runtime operand of a program that reads (or writes)
// it on a storage of `storageElems` elements of view.dtype: the same program then serves every
// offset (a KV cache written at a moving position). False where the read would run past the end
// of the storage (a strided block read pads there, which depends on the offset).
bool offsetCanBeOperand(const ViewSpec& view, int64_t storageElems, bool write);

}  // namespace tpu::runtime
