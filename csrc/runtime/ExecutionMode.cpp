#include "ExecutionMode.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace tpu::runtime {
namespace {

std::atomic<int> gMode{static_cast<int>(EagerMode::Strict)};
ErrorHooks gHooks;

}  // namespace

EagerMode eagerMode() { return static_cast<EagerMode>(gMode.load(std::memory_order_relaxed)); }

void setEagerMode(EagerMode m) { gMode.store(static_cast<int>(m)); }

const char* eagerModeName(EagerMode m) {
  switch (m) {
    case EagerMode::Strict: return "strict";
    case EagerMode::Debug: return "debug";
    case EagerMode::Fused: return "fused";
  }
  return "?";
}

std::optional<EagerMode> parseEagerMode(std::string_view name) {
  if (name == "strict") return EagerMode::Strict;
  if (name == "debug") return EagerMode::Debug;
  if (name == "fused") return EagerMode::Fused;
  return std::nullopt;
}

const char* availableEagerModes() { return "'strict', 'debug', 'fused'"; }

NonFinitePolicy nonFinitePolicy() {
  const char* env = std::getenv("TORCH_TPU_DEBUG_NONFINITE");
  if (!env || !*env) return NonFinitePolicy::Raise;
  std::string_view v(env);
  if (v == "warn") return NonFinitePolicy::Warn;
  if (v == "off" || v == "0") return NonFinitePolicy::Off;
  return NonFinitePolicy::Raise;
}

void setErrorHooks(const ErrorHooks& hooks) { gHooks = hooks; }

void raiseError(ErrorKind kind, const std::string& msg) {
  if (gHooks.raise) gHooks.raise(kind, msg);
  if (kind == ErrorKind::Index) throw std::out_of_range(msg);
  throw std::runtime_error(msg);
}

void warnUser(const std::string& msg) {
  if (gHooks.warn) gHooks.warn(msg);
  else std::cerr << "[torch_tpu] warning: " << msg << "\n";
}

std::string currentOpName(const char* fallback) {
  if (gHooks.currentOp) {
    std::string name = gHooks.currentOp();
    if (!name.empty()) return name;
  }
  return fallback;
}

std::string calledAt() {
  std::string loc = gHooks.userLocation ? gHooks.userLocation() : std::string();
  return loc.empty() ? std::string() : ", called at " + loc;
}

}  // namespace tpu::runtime
