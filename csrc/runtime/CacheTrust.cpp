#include "CacheTrust.h"

#include <openssl/hmac.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tpu::runtime {
namespace {

bool truthy(const char* v) {
  if (!v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

CacheTrust CacheTrust::fromEnv() {
  CacheTrust t;
  t.trustShared = truthy(std::getenv("TORCH_TPU_CACHE_TRUST_SHARED"));
  if (const char* path = std::getenv("TORCH_TPU_CACHE_KEY_FILE"); path && path[0]) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    if (in) text << in.rdbuf();
    t.key = text.str();
    while (!t.key.empty() && std::isspace(static_cast<unsigned char>(t.key.back()))) t.key.pop_back();
    if (!in || t.key.empty())
      t.error = std::string("cannot read a key from TORCH_TPU_CACHE_KEY_FILE=") + path + " (" +
                (in ? "empty file" : std::strerror(errno)) +
                "): the persistent compile cache is off, compiled programs stay in memory";
  } else if (const char* key = std::getenv("TORCH_TPU_CACHE_KEY"); key && key[0]) {
    t.key = key;
  }
  return t;
}

std::string CacheTrust::ownershipProblem(const struct stat& st) const {
  if (!checksOwners()) return "";
  uid_t me = ::geteuid();
  if (st.st_uid != me)
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by other users (mode " + octal(st.st_mode) + ")";
  return "";
}

Sha256::Digest CacheTrust::seal(const Sha256::Digest& entryKey, std::string_view body) const {
  if (!signs()) return Sha256::hash(body);
  std::string message(reinterpret_cast<const char*>(entryKey.data()), entryKey.size());
  message.append(body);
  return hmacSha256(key, message);
}

Sha256::Digest hmacSha256(std::string_view key, std::string_view data) {
  Sha256::Digest out{};
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out.data(), &n) ||
      n != out.size())
    throw std::runtime_error("torch_tpu: HMAC-SHA256 failed (OpenSSL)");
  return out;
}

}  // namespace tpu::runtime
