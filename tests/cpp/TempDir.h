#pragma once
// A fresh directory under the system temp folder (0700, from mkdtemp), removed with everything in it at the
// end of the test, even where the test took away its own write permission.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tpu-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
};
