#include "coordinator_store/etcd_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <nlohmann/json.hpp>

namespace tributary::coordinator_store {
namespace {

using nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::size_t kMaxResponseBytes = 64u << 20;

std::size_t collect(char* data, std::size_t size, std::size_t count, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * count > kMaxResponseBytes) return 0;  // curl reports the error
  body->append(data, size * count);
  return size * count;
}

// The gateway writes int64 as strings; accept numbers too.
std::int64_t int_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_string()) {
    const auto& text = it->get_ref<const std::string&>();
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size() ? v : 0;
  }
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return 0;
}

Result<EtcdKeyValue> key_value(const json& kv) {
  EtcdKeyValue out;
  TRIB_ASSIGN_OR_RETURN(out.key, base64_decode(kv.value("key", "")));
  TRIB_ASSIGN_OR_RETURN(out.value, base64_decode(kv.value("value", "")));
  out.create_revision = int_field(kv, "create_revision");
  out.mod_revision = int_field(kv, "mod_revision");
  out.lease = int_field(kv, "lease");
  return out;
}

Result<std::vector<EtcdKeyValue>> key_values(const json& range) {
  std::vector<EtcdKeyValue> out;
  if (auto it = range.find("kvs"); it != range.end() && it->is_array()) {
    for (const auto& kv : *it) {
      TRIB_ASSIGN_OR_RETURN(auto v, key_value(kv));
      out.push_back(std::move(v));
    }
  }
  return out;
}

// The smallest key greater than every key with this prefix (etcd's range_end).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

const char* target_name(EtcdCompare::Target t) {
  switch (t) {
    case EtcdCompare::Target::kCreateRevision: return "CREATE";
    case EtcdCompare::Target::kModRevision: return "MOD";
    case EtcdCompare::Target::kLease: return "LEASE";
  }
  return "MOD";
}

const char* target_field(EtcdCompare::Target t) {
  switch (t) {
    case EtcdCompare::Target::kCreateRevision: return "create_revision";
    case EtcdCompare::Target::kModRevision: return "mod_revision";
    case EtcdCompare::Target::kLease: return "lease";
  }
  return "mod_revision";
}

Result<json> parse(const std::string& body, const std::string& what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return error(StatusCode::kUnavailable, "etcd " + what + ": answer is not a JSON object");
  if (j.contains("error") || (j.contains("code") && j.contains("message"))) {
    return error(StatusCode::kInternal,
                 "etcd " + what + ": " + j.value("message", j.value("error", std::string("?"))));
  }
  return j;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    return error(StatusCode::kInvalidArgument, "base64 length is not a multiple of 4");
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return error(StatusCode::kInvalidArgument, "not base64");
  // EVP_DecodeBlock counts the padding as zero bytes.
  const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::create(std::vector<std::string> endpoints,
                                                       Duration request_timeout) {
  if (endpoints.empty()) return error(StatusCode::kInvalidArgument, "no etcd endpoint");
  for (auto& e : endpoints) {
    if (!e.starts_with("http://") && !e.starts_with("https://"))
      return error(StatusCode::kInvalidArgument, "etcd endpoint '" + e + "' is not an http URL");
    while (e.ends_with("/")) e.pop_back();
  }
  if (request_timeout < milliseconds(1))
    return error(StatusCode::kInvalidArgument, "etcd request timeout below 1 ms");
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(endpoints), request_timeout));
  if (client->curl_ == nullptr) return error(StatusCode::kInternal, "curl_easy_init failed");
  return client;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Duration request_timeout)
    : endpoints_(std::move(endpoints)),
      request_timeout_(request_timeout),
      curl_(curl_easy_init()) {}

EtcdClient::~EtcdClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<std::string> EtcdClient::post(const std::string& path, const std::string& body,
                                     Duration timeout) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (timeout <= Duration::zero() || timeout > request_timeout_) timeout = request_timeout_;
  const TimePoint deadline = std::chrono::steady_clock::now() + timeout;
  std::string reasons;
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const std::size_t at = (preferred_ + i) % endpoints_.size();
    const auto left = duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const std::string url = endpoints_[at] + path;
    std::string response;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(left.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(left.count()));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    const CURLcode rc = curl_easy_perform(curl);
    long http = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    curl_slist_free_all(headers);
    if (rc == CURLE_OK && (http == 200 || (http >= 400 && !response.empty()))) {
      preferred_ = at;
      return response;  // etcd's own errors come as JSON bodies with 4xx/5xx
    }
    reasons += (reasons.empty() ? "" : "; ") + endpoints_[at] + ": " +
               (rc == CURLE_OK ? "HTTP " + std::to_string(http) : curl_easy_strerror(rc));
  }
  return error(StatusCode::kUnavailable,
               "etcd " + path + ": no answer within " +
                   std::to_string(duration_cast<milliseconds>(timeout).count()) + " ms (" +
                   (reasons.empty() ? std::string("deadline passed") : reasons) + ")");
}

Result<std::optional<EtcdKeyValue>> EtcdClient::get(const std::string& key) {
  TRIB_ASSIGN_OR_RETURN(const std::string body,
                        post("/v3/kv/range", json{{"key", base64_encode(key)}}.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "range"));
  TRIB_ASSIGN_OR_RETURN(auto kvs, key_values(j));
  if (kvs.empty()) return std::optional<EtcdKeyValue>();
  return std::optional<EtcdKeyValue>(std::move(kvs.front()));
}

Result<std::vector<EtcdKeyValue>> EtcdClient::get_prefix(const std::string& prefix) {
  const json request{{"key", base64_encode(prefix)},
                     {"range_end", base64_encode(prefix_end(prefix))}};
  TRIB_ASSIGN_OR_RETURN(const std::string body, post("/v3/kv/range", request.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "range"));
  return key_values(j);
}

Result<EtcdTxnResult> EtcdClient::txn(const std::vector<EtcdCompare>& compares,
                                      const std::vector<EtcdPut>& puts,
                                      const std::vector<std::string>& read_on_failure) {
  json request{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) {
    request["compare"].push_back({{"key", base64_encode(c.key)},
                                  {"target", target_name(c.target)},
                                  {"result", "EQUAL"},
                                  {target_field(c.target), std::to_string(c.equals)}});
  }
  for (const auto& p : puts) {
    json put{{"key", base64_encode(p.key)}, {"value", base64_encode(p.value)}};
    if (p.lease != 0) put["lease"] = std::to_string(p.lease);
    request["success"].push_back({{"request_put", put}});
  }
  for (const auto& key : read_on_failure)
    request["failure"].push_back({{"request_range", {{"key", base64_encode(key)}}}});
  TRIB_ASSIGN_OR_RETURN(const std::string body, post("/v3/kv/txn", request.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "txn"));
  EtcdTxnResult out;
  out.succeeded = j.value("succeeded", false);
  if (auto h = j.find("header"); h != j.end()) out.revision = int_field(*h, "revision");
  if (auto r = j.find("responses"); !out.succeeded && r != j.end() && r->is_array()) {
    for (const auto& response : *r) {
      if (auto range = response.find("response_range"); range != response.end()) {
        TRIB_ASSIGN_OR_RETURN(auto kvs, key_values(*range));
        for (auto& kv : kvs) out.read.push_back(std::move(kv));
      }
    }
  }
  return out;
}

Result<std::int64_t> EtcdClient::grant_lease(Duration ttl) {
  const auto secs = std::max<std::int64_t>(1, duration_cast<seconds>(ttl).count());
  TRIB_ASSIGN_OR_RETURN(const std::string body,
                        post("/v3/lease/grant", json{{"TTL", std::to_string(secs)}}.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "lease grant"));
  const std::int64_t id = int_field(j, "ID");
  if (id == 0) return error(StatusCode::kInternal, "etcd lease grant: no lease id in the answer");
  return id;
}

Result<Duration> EtcdClient::keep_alive(std::int64_t lease, Duration timeout) {
  TRIB_ASSIGN_OR_RETURN(
      const std::string body,
      post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump(), timeout));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "lease keep-alive"));
  // A streaming call: the gateway wraps the one answer in "result"; an expired lease
  // comes back without a TTL.
  const json& result = j.contains("result") ? j["result"] : j;
  return Duration(seconds(int_field(result, "TTL")));
}

Result<Duration> EtcdClient::time_to_live(std::int64_t lease) {
  TRIB_ASSIGN_OR_RETURN(const std::string body,
                        post("/v3/lease/timetolive", json{{"ID", std::to_string(lease)}}.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "lease time-to-live"));
  // An unknown lease answers TTL -1; an expired one not yet swept, 0 or less.
  return Duration(seconds(j.contains("TTL") ? int_field(j, "TTL") : -1));
}

Status EtcdClient::revoke_lease(std::int64_t lease) {
  TRIB_ASSIGN_OR_RETURN(const std::string body,
                        post("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump()));
  TRIB_ASSIGN_OR_RETURN(const json j, parse(body, "lease revoke"));
  (void)j;
  return Status::ok();
}

}  // namespace tributary::coordinator_store
