// A small client of etcd's v3 API through its JSON gateway (HTTP POST of the protobuf
// messages as JSON, keys and values base64-encoded, 64-bit integers as strings), over
// libcurl. It covers what leader election and a compare-and-swap store need: range, a
// transaction of compares and puts, and lease grant / keep-alive / revoke.
//
// Guarantees:
//  - Every call has a deadline (`request_timeout`, connection included); none blocks
//    longer. A call tries the endpoints in order, starting with the last one that
//    answered, within that one deadline.
//  - Failures are values: kUnavailable when no endpoint answered in time (or answered
//    garbage), with the endpoint and curl's reason; kInternal for an error etcd reported.
//  - Not thread-safe: one owner thread (the coordinator's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::coordinator_store {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

// One comparison of a transaction (etcd's Compare with result EQUAL).
struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kLease };
  std::string key;
  Target target = Target::kModRevision;
  std::int64_t equals = 0;  // 0 for a revision: the key does not exist
};

struct EtcdPut {
  std::string key;
  std::string value;
  std::int64_t lease = 0;  // 0: none
};

struct EtcdTxnResult {
  bool succeeded = false;
  std::int64_t revision = 0;  // the store's revision after the transaction
  // What the failure branch read (the keys of `read_on_failure`), when it ran.
  std::vector<EtcdKeyValue> read;
};

class EtcdClient {
 public:
  // `endpoints`: "http://HOST:PORT" of etcd's client URLs. kInvalidArgument when empty or
  // not http(s) URLs (checked by create()).
  static Result<std::unique_ptr<EtcdClient>> create(std::vector<std::string> endpoints,
                                                    Duration request_timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The key's current value, or nullopt when it does not exist.
  Result<std::optional<EtcdKeyValue>> get(const std::string& key);
  // Every key starting with `prefix`, in key order.
  Result<std::vector<EtcdKeyValue>> get_prefix(const std::string& prefix);
  // If every compare holds, the puts; otherwise reads `read_on_failure`.
  Result<EtcdTxnResult> txn(const std::vector<EtcdCompare>& compares,
                            const std::vector<EtcdPut>& puts,
                            const std::vector<std::string>& read_on_failure = {});
  // A lease of `ttl` (whole seconds, at least 1); its id.
  Result<std::int64_t> grant_lease(Duration ttl);
  // Renews the lease; the TTL it now has, or zero when it has expired (or never existed).
  // `timeout`: this call's deadline, when shorter than the request timeout.
  Result<Duration> keep_alive(std::int64_t lease, Duration timeout = Duration::zero());
  Status revoke_lease(std::int64_t lease);
  // The lease's remaining TTL as etcd sees it, without renewing it; zero or less once it
  // has expired (etcd deletes its keys only at its next expiry sweep, up to 500 ms later)
  // or when it does not exist.
  Result<Duration> time_to_live(std::int64_t lease);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  EtcdClient(std::vector<std::string> endpoints, Duration request_timeout);
  // POSTs `body` to `path` (e.g. "/v3/kv/range") within `timeout` (zero: the request
  // timeout); the response body.
  Result<std::string> post(const std::string& path, const std::string& body,
                           Duration timeout = Duration::zero());

  std::vector<std::string> endpoints_;
  Duration request_timeout_;
  std::size_t preferred_ = 0;  // the endpoint that answered last
  void* curl_ = nullptr;       // CURL*, reused so connections are kept alive
};

// etcd's base64 (standard alphabet, padded). decode: kInvalidArgument on bad input.
std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

}  // namespace tributary::coordinator_store
