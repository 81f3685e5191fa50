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
// The values of `view` gathered from `flat` (1-D of view.dtype).
hlo::Value readView(hlo::Builder& b, hlo::Value flat, const ViewSpec& view);
// `flat` (1-D of view.dtype) with the elements of `view` replaced by `values`.
hlo::Value writeView(hlo::Builder& b, hlo::Value flat, const ViewSpec& view, hlo::Value values);

}  // namespace tpu::runtime
