#pragma once
// Shared set-up for tests that execute on the plugin named by TORCH_TPU_TEST_PLUGIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "csrc/runtime/Runtime.h"

inline tpu::runtime::Runtime& testRuntime() {
  static bool configured = [] {
    const char* path = std::getenv("TORCH_TPU_TEST_PLUGIN");
    tpu::runtime::Runtime::configure({{"test", path ? path : ""}});
    return true;
  }();
  (void)configured;
  return tpu::runtime::Runtime::get();
}

template <class T>
std::vector<T> toHost(const tpu::pjrt::Buffer& b, size_t n) {
  std::vector<T> out(n);
  b.toHost(out.data(), n * sizeof(T)).await();
  return out;
}
