// Status / StatusOr: the error currency of aitune's C++ libraries. Library code never throws
// and never aborts; every fallible call returns one of these, and the Python bindings map the
// code to an exception class in one table (cpp/python/errors.cc).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace aitune {

// Codes follow docs/reference/native.md#runtime-api. Keep in sync with the binding table and the CLI exit
// codes.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kGraphNotFound,
  kProfileShape,
  kCorrupt,
  kUnsupported,
  kIncompatible,
  kBackendUnavailable,
  kBackendError,
  kCudaError,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<CodeName>: <message>", for logs and test failure output.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status graph_not_found(std::string m) { return {StatusCode::kGraphNotFound, std::move(m)}; }
inline Status profile_shape_error(std::string m) { return {StatusCode::kProfileShape, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    // An ok Status without a value is a programming error; turn it into an internal error
    // rather than handing out an empty optional.
    if (status_.ok()) status_ = internal_error("StatusOr constructed from an ok Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace aitune

#define AITUNE_CONCAT_INNER_(a, b) a##b
#define AITUNE_CONCAT_(a, b) AITUNE_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not ok.
#define AITUNE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::aitune::Status aitune_status_ = (expr);        \
    if (!aitune_status_.ok()) return aitune_status_; \
  } while (0)

// `lhs` = value of the StatusOr `expr`, or returns its Status.
#define AITUNE_ASSIGN_OR_RETURN(lhs, expr) \
  AITUNE_ASSIGN_OR_RETURN_IMPL_(AITUNE_CONCAT_(aitune_statusor_, __LINE__), lhs, expr)
#define AITUNE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// Returns kInvalidArgument with `message` (any expression convertible to std::string) unless `cond`.
#define AITUNE_CHECK_ARG(cond, message)                                   \
  do {                                                                    \
    if (!(cond)) return ::aitune::invalid_argument(std::string(message)); \
  } while (0)
