// Expected outcomes of an elastic system, as values. See docs/errors.md.
//
// A Status is what a collective, a link or a decoder returns when something that can
// legitimately happen in a cluster happened: a peer vanished, a deadline passed, a frame
// was garbage, the epoch moved on. Broken invariants are not Statuses: they are
// TRIB_CHECK failures (core/check.h), which report file and line and stop the process.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tributary {

enum class StatusCode : std::uint8_t {
  kOk = 0,
  kPeerLost,         // a peer's link broke or the peer is known dead
  kTimedOut,         // a deadline passed before the peer made progress
  kAborted,          // the operation was aborted locally (abort(), a new view)
  kStaleEpoch,       // the message or request belongs to an older epoch
  kBadFrame,         // a peer sent bytes that do not decode
  kMismatch,         // ranks disagree on count, dtype, op or collective
  kInvalidArgument,  // the caller passed something unusable
  kAuthFailed,       // the peer could not prove the cluster secret
  kUnavailable,      // a service (coordinator, port) cannot be reached
  kEvicted,          // the coordinator removed this member from the view
  kInternal,         // an error from the OS or a library we cannot classify
  kRoundFailed,      // a federated round had fewer contributors than its minimum
};

std::string_view to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "peer lost: rank 3 closed the link"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status error(StatusCode code, std::string message) { return {code, std::move(message)}; }

// A value or the Status that explains why there is none (std::expected-style).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tributary

// Returns early from a function returning Status (or Result<T>) when `expr` failed.
#define TRIB_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::tributary::Status trib_status_ = (expr);      \
    if (!trib_status_.is_ok()) return trib_status_; \
  } while (0)

// Declares `lhs` from a Result<T> expression, or returns its Status from the enclosing
// function when it failed:  TRIB_ASSIGN_OR_RETURN(auto link, endpoint.connect(...));
#define TRIB_ASSIGN_OR_RETURN(lhs, expr) \
  TRIB_ASSIGN_OR_RETURN_IMPL_(TRIB_STATUS_CONCAT_(trib_result_, __LINE__), lhs, expr)
#define TRIB_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
#define TRIB_STATUS_CONCAT_(a, b) TRIB_STATUS_CONCAT_INNER_(a, b)
#define TRIB_STATUS_CONCAT_INNER_(a, b) a##b
