// SHA-256, the checkpoint's integrity check (docs/reference/checkpoint.md#integrity-and-compatibility),
// through OpenSSL's EVP API. OpenSSL's headers stay out of this one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace aitune {

// Lowercase hex SHA-256. `sha256_file` streams the file; kNotFound when it is missing.
std::string sha256_hex(std::string_view data);
StatusOr<std::string> sha256_file(const std::string& path);

// Streaming form. A failed OpenSSL call makes hex() return "" (never a valid hash).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t n);
  std::string hex();

 private:
  struct Free {
    void operator()(evp_md_ctx_st* c) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
  bool ok_ = false;
};

}  // namespace aitune
