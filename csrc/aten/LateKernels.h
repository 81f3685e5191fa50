#pragma once
// Shared by the kernels of ops other libraries define (fbgemm's, torchrec's: JaggedKernels.cpp,
// ShardedEmbeddingKernels.cpp): their argument checks, and their registration once the defining library has
// loaded, one torch::Library per op, so a kernel whose C++ signature the dispatcher refuses (another release
// of that library) leaves out that op alone, with its message kept for a warning.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpu::aten {

using OptTensor = std::optional<at::Tensor>;
inline bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

inline void checkTpu(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, op, ": expected ", name, " on tpu, got ",
              t.device());
}

inline void checkIndexTensor(const char* op, const char* name, const at::Tensor& t) {
  checkTpu(op, name, t);
  TORCH_CHECK(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, op, ": expected ", name,
              " to be int32 or int64, got ", t.scalar_type());
}

class LateKernels {
 public:
  // `file`: where the kernels are (__FILE__), as the dispatcher's registration site.
  explicit LateKernels(const char* file) : file_(file) {}
  template <class Kernel>
  void add(const char* ns, const char* name, Kernel&& kernel) {
    try {
      auto m = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, file_, 0);
      m->impl(name, std::forward<Kernel>(kernel));
      libs_.push_back(std::move(m));
    } catch (const c10::Error& e) {
      failures_ += std::string(failures_.empty() ? "" : "; ") + ns + "::" + name + ": " + e.what_without_backtrace();
    }
  }
  // Runs `body(*this)` (its add calls) the first time only: "" when every kernel was registered then, else
  // each refusal; later calls return "" (the kernels stay as the first call left them).
  template <class Body>
  std::string once(Body&& body) {
    if (done_) return "";
    done_ = true;
    body(*this);
    return failures_;
  }

 private:
  const char* file_;
  bool done_ = false;
  std::vector<std::unique_ptr<torch::Library>> libs_;  // kept: a Library deregisters its kernels when destroyed
  std::string failures_;
};

}  // namespace tpu::aten
