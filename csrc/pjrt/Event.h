#pragma once
// Owning wrapper of a PJRT_Event.
#include <functional>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Event {
 public:
  Event() = default;
  Event(const PJRT_Api* api, PJRT_Event* ev) : api_(api), ev_(ev) {}
  Event(Event&& o) noexcept : api_(o.api_), ev_(o.ev_) { o.ev_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { reset(); }

  // Blocks until the event is ready; throws PjrtError if it carries an error.
  void await();
  // True once the event has fired (never blocks).
  bool ready() const;
  bool valid() const { return ev_ != nullptr; }
  // Calls `fn(ok)` once the event has fired (at once if it has), on a plugin thread.
  // False (and `fn` is never called) when the plugin lacks PJRT_Event_OnReady.
  bool onReady(std::function<void(bool ok)> fn) const;

 private:
  void reset();
  const PJRT_Api* api_ = nullptr;
  PJRT_Event* ev_ = nullptr;
};

}  // namespace tpu::pjrt
