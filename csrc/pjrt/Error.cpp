#include "Error.h"

namespace tpu::pjrt {

void check(const PJRT_Api* api, PJRT_Error* err, const char* what) {
  if (!err) return;
  auto msgArgs = TPU_PJRT_ARGS(PJRT_Error_Message_Args);
  msgArgs.error = err;
  api->PJRT_Error_Message(&msgArgs);
  std::string msg(msgArgs.message, msgArgs.message_size);
  int code = 0;
  if (api->PJRT_Error_GetCode) {
    auto codeArgs = TPU_PJRT_ARGS(PJRT_Error_GetCode_Args);
    codeArgs.error = err;
    PJRT_Error* codeErr = api->PJRT_Error_GetCode(&codeArgs);
    if (!codeErr) code = codeArgs.code;
  }
  ignore(api, err);
  throw PjrtError(std::string(what) + ": " + msg, code);
}

void ignore(const PJRT_Api* api, PJRT_Error* err) noexcept {
  if (!err) return;
  auto d = TPU_PJRT_ARGS(PJRT_Error_Destroy_Args);
  d.error = err;
  api->PJRT_Error_Destroy(&d);
}

}  // namespace tpu::pjrt
