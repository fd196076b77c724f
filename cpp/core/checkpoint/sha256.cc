#include "checkpoint/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>

#include <cerrno>

#include "checkpoint/posix_file.h"
#include "checkpoint/zip_format.h"

namespace aitune {

using zip::errno_status;
using zip::Fd;
using zip::in_quotes;
using zip::kChunk;
using zip::read_some;

void Sha256::Free::operator()(evp_md_ctx_st* c) const { EVP_MD_CTX_free(c); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  ok_ = ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t n) { ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), data, n) == 1; }

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) return "";
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kDigits[md[i] >> 4];
    out[2 * i + 1] = kDigits[md[i] & 0xF];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data.data(), data.size());
  return sha.hex();
}

StatusOr<std::string> sha256_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return not_found("File not found: " + path);
    return errno_status("Cannot open " + in_quotes(path), errno);
  }
  Sha256 sha;
  std::string buf(kChunk, '\0');
  while (true) {
    const ssize_t r = read_some(fd.get(), buf.data(), buf.size());
    if (r < 0) return errno_status("Cannot read " + in_quotes(path), errno);
    if (r == 0) break;
    sha.update(buf.data(), static_cast<size_t>(r));
  }
  std::string hex = sha.hex();
  if (hex.empty()) return internal_error("OpenSSL SHA-256 failed for " + in_quotes(path));
  return hex;
}

}  // namespace aitune
