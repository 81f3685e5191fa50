#include "DeviceTrace.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace tpu::runtime::trace {

std::atomic<bool> gEnabled{false};

namespace {

struct Pending {
  Span span;
  pjrt::Event done;
  std::shared_ptr<std::atomic<int64_t>> endNs;  // set by the ready callback (0: not yet)
};

thread_local std::vector<uint64_t> tCorrelation;
uint64_t currentCorrelation() { return tCorrelation.empty() ? 0 : tCorrelation.back(); }

std::mutex mu;
std::vector<Span> spans;
std::vector<Pending> pending;

}  // namespace

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void setEnabled(bool on) { gEnabled.store(on); }

void pushCorrelation(uint64_t id) { tCorrelation.push_back(id); }
void popCorrelation() {
  if (!tCorrelation.empty()) tCorrelation.pop_back();
}

void span(Kind kind, std::string name, int device, int64_t startNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(mu);
  spans.push_back(Span{kind, std::move(name), device, startNs, endNs, currentCorrelation()});
}

void execution(std::string name, int device, pjrt::Event done) {
  int64_t now = nowNs();
  Pending p{Span{Kind::Execute, std::move(name), device, now, 0, currentCorrelation(), now}, std::move(done),
            std::make_shared<std::atomic<int64_t>>(0)};
  auto end = p.endNs;
  if (!p.done.onReady([end](bool) { end->store(nowNs()); })) end->store(0);  // stamped when taken
  std::lock_guard<std::mutex> lock(mu);
  pending.push_back(std::move(p));
}

std::vector<Span> take() {
  std::vector<Pending> waiting;
  std::vector<Span> out;
  {
    std::lock_guard<std::mutex> lock(mu);
    waiting.swap(pending);
    out.swap(spans);
  }
  std::map<int, int64_t> lastEnd;  // per device: programs run in launch order
  for (Pending& p : waiting) {
    try {
      p.done.await();
    } catch (...) {  // a failed program still occupied the device until it failed
    }
    int64_t end = p.endNs->load();
    if (end == 0) end = nowNs();
    int64_t start = std::max(p.span.startNs, lastEnd[p.span.device]);
    p.span.startNs = std::min(start, end);
    p.span.endNs = end;
    lastEnd[p.span.device] = end;
    out.push_back(std::move(p.span));
  }
  return out;
}

}  // namespace tpu::runtime::trace
