#pragma once
// Device-side spans for the profiler (torch.profiler with ProfilerActivity.PrivateUse1): each program's
// execution, compiles, host<->device transfers. Off unless a profiler session is recording: then the hot
// path pays one relaxed atomic load per launch.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "csrc/pjrt/Event.h"

namespace tpu::runtime::trace {

enum class Kind : int { Execute = 0, Compile = 1, Transfer = 2 };

struct Span {
  Kind kind;
  std::string name;
  int device;
  int64_t startNs, endNs;  // system clock, ns since the epoch (kineto's clock)
  uint64_t correlation = 0;  // the profiler's id of the CPU op that launched it (0: none)
  int64_t launchNs = 0;      // programs: when the host launched it (startNs may be later: queued behind others)
};

extern std::atomic<bool> gEnabled;
inline bool enabled() { return gEnabled.load(std::memory_order_relaxed); }
void setEnabled(bool on);
int64_t nowNs();

// The profiler's correlation id of the op running on this thread (kineto pushes one per CPU op).
void pushCorrelation(uint64_t id);
void popCorrelation();

// A finished span.
void span(Kind kind, std::string name, int device, int64_t startNs, int64_t endNs);
// A program launched now on `device`; it ends when `done` is ready. The span starts at the launch or when the
// previous program on that device ended, whichever is later (programs on one device run in order).
void execution(std::string name, int device, pjrt::Event done);
// Waits for pending executions, then returns (and forgets) every span.
std::vector<Span> take();

}  // namespace tpu::runtime::trace
