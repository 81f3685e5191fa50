#pragma once
// Who may have written what the persistent compile cache loads. An entry is
// native code that this process runs, so an unsigned entry is read only from a
// folder this user owns and nobody else can write, and only when the entry file
// itself is this user's and writable by nobody else. A folder shared by a team
// (several users, several hosts) instead seals every entry with the team's key
// (HMAC-SHA256, OpenSSL): an entry whose seal does not verify is never loaded.
// Torch-free.
#include <sys/stat.h>

#include <string>
#include <string_view>

#include "Sha256.h"

namespace tpu::runtime {

struct CacheTrust {
  std::string key;           // TORCH_TPU_CACHE_KEY_FILE's contents or TORCH_TPU_CACHE_KEY; empty: unsigned
  bool trustShared = false;  // TORCH_TPU_CACHE_TRUST_SHARED=1: accept unsigned entries others can write
  std::string error;         // a key was asked for but cannot be read (then the persistent tier stays off)

  static CacheTrust fromEnv();
  bool signs() const { return !key.empty(); }
  // Owners and modes matter for unsigned entries, unless the user opted into a shared folder.
  bool checksOwners() const { return !signs() && !trustShared; }
  // Why the folder or entry `st` describes may hold what another user wrote; "" when it cannot.
  std::string ownershipProblem(const struct stat& st) const;
  // The 32 bytes stored with an entry: SHA-256 of its body (a checksum) when
  // unsigned; with a key, HMAC-SHA256 over the entry's cache key and body, so a
  // sealed entry cannot be moved to another key's name either.
  Sha256::Digest seal(const Sha256::Digest& entryKey, std::string_view body) const;
};

Sha256::Digest hmacSha256(std::string_view key, std::string_view data);

}  // namespace tpu::runtime
