#include "Event.h"

#include "Error.h"

namespace tpu::pjrt {

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    api_ = o.api_;
    ev_ = o.ev_;
    o.ev_ = nullptr;
  }
  return *this;
}

void Event::await() {
  if (!ev_) return;
  auto args = TPU_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = ev_;
  PJRT_Error* err = api_->PJRT_Event_Await(&args);
  reset();
  check(api_, err, "PJRT_Event_Await");
}

bool Event::ready() const {
  if (!ev_) return true;
  auto args = TPU_PJRT_ARGS(PJRT_Event_IsReady_Args);
  args.event = ev_;
  check(api_, api_->PJRT_Event_IsReady(&args), "PJRT_Event_IsReady");
  return args.is_ready;
}

void Event::reset() {
  if (!ev_) return;
  auto args = TPU_PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = ev_;
  api_->PJRT_Event_Destroy(&args);
  ev_ = nullptr;
}

}  // namespace tpu::pjrt
