#include "Executable.h"

#include "Error.h"

namespace tpu::pjrt {

Executable::Executable(const PJRT_Api* api, PJRT_LoadedExecutable* exe) : api_(api), exe_(exe) {
  auto get = TPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe_;
  check(api_, api_->PJRT_LoadedExecutable_GetExecutable(&get), "PJRT_LoadedExecutable_GetExecutable");
  unloaded_ = get.executable;
  auto n = TPU_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  n.executable = unloaded_;
  check(api_, api_->PJRT_Executable_NumOutputs(&n), "PJRT_Executable_NumOutputs");
  numOutputs_ = n.num_outputs;
}

Executable::~Executable() {
  if (unloaded_) {
    auto d = TPU_PJRT_ARGS(PJRT_Executable_Destroy_Args);
    d.executable = unloaded_;
    ignore(api_, api_->PJRT_Executable_Destroy(&d));
  }
  auto d = TPU_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  d.executable = exe_;
  ignore(api_, api_->PJRT_LoadedExecutable_Destroy(&d));
}

std::vector<std::unique_ptr<Buffer>> Executable::execute(const std::vector<PJRT_Buffer*>& args,
                                                         PJRT_Device* device, Event* done) const {
  auto opts = TPU_PJRT_ARGS(PJRT_ExecuteOptions);
  std::vector<PJRT_Buffer*> outs(numOutputs_, nullptr);
  PJRT_Buffer* const* argList = args.data();
  PJRT_Buffer** outList = outs.data();
  auto ex = TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  ex.executable = exe_;
  ex.options = &opts;
  ex.argument_lists = &argList;
  ex.num_devices = 1;
  ex.num_args = args.size();
  ex.output_lists = &outList;
  ex.execute_device = device;
  PJRT_Event* doneEvent = nullptr;
  if (done) ex.device_complete_events = &doneEvent;
  check(api_, api_->PJRT_LoadedExecutable_Execute(&ex), "PJRT_LoadedExecutable_Execute");
  if (done) *done = Event(api_, doneEvent);
  std::vector<std::unique_ptr<Buffer>> result;
  result.reserve(numOutputs_);
  for (PJRT_Buffer* b : outs) result.push_back(std::make_unique<Buffer>(api_, b));
  return result;
}

std::string Executable::serialize() const {
  auto args = TPU_PJRT_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = unloaded_;
  check(api_, api_->PJRT_Executable_Serialize(&args), "PJRT_Executable_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter) args.serialized_executable_deleter(args.serialized_executable);
  return bytes;
}

}  // namespace tpu::pjrt
