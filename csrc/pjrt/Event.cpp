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

namespace {
void runReadyCallback(PJRT_Error* error, void* arg) {
  auto* fn = static_cast<std::pair<const PJRT_Api*, std::function<void(bool)>>*>(arg);
  bool ok = error == nullptr;
  if (error) ignore(fn->first, error);
  fn->second(ok);
  delete fn;
}
}  // namespace

bool Event::onReady(std::function<void(bool ok)> fn) const {
  if (!ev_ || !api_->PJRT_Event_OnReady) {
    if (!ev_) fn(true);
    return !ev_;
  }
  auto* arg = new std::pair<const PJRT_Api*, std::function<void(bool)>>(api_, std::move(fn));
  auto args = TPU_PJRT_ARGS(PJRT_Event_OnReady_Args);
  args.event = ev_;
  args.callback = &runReadyCallback;
  args.user_arg = arg;
  PJRT_Error* err = api_->PJRT_Event_OnReady(&args);
  if (err) {
    delete arg;
    check(api_, err, "PJRT_Event_OnReady");
  }
  return true;
}

void Event::reset() {
  if (!ev_) return;
  auto args = TPU_PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = ev_;
  api_->PJRT_Event_Destroy(&args);
  ev_ = nullptr;
}

}  // namespace tpu::pjrt
