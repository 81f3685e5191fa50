#include "PrecisionCost.h"

#include <atomic>
#include <cctype>

#include "ExecutionMode.h"

namespace tpu::runtime {

namespace {

bool isTpu(const std::string& platform) {
  std::string p;
  for (char c : platform) p += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return p.find("tpu") != std::string::npos;
}

}  // namespace

std::string dotPrecisionCost(const std::string& platform, const std::string& module) {
  if (!isTpu(platform)) return "";
  const char* level = nullptr;
  const char* passes = nullptr;
  if (module.find("#stablehlo<precision HIGHEST>") != std::string::npos) {
    level = "highest", passes = "6";
  } else if (module.find("#stablehlo<precision HIGH>") != std::string::npos) {
    level = "high", passes = "3";
  } else {
    return "";
  }
  return std::string("torch_tpu: float32 matmuls and convolutions run at precision \"") + level +
         "\" (torch.get_float32_matmul_precision()): the TPU computes each as " + passes +
         " bfloat16 passes, about " + passes +
         "x the time of the single pass of precision \"medium\". Where bfloat16 products are accurate enough, "
         "use `with torch.tpu.precision(\"medium\"):` for a region or torch.set_float32_matmul_precision("
         "\"medium\"). (shown once)";
}

void warnDotPrecisionCostOnce(const std::string& platform, const std::string& module) {
  static std::atomic<bool> warnedHigh{false}, warnedHighest{false};
  if (warnedHigh && warnedHighest) return;
  std::string msg = dotPrecisionCost(platform, module);
  if (msg.empty()) return;
  std::atomic<bool>& flag = msg.find("\"highest\"") != std::string::npos ? warnedHighest : warnedHigh;
  if (!flag.exchange(true)) warnUser(msg);
}

}  // namespace tpu::runtime
