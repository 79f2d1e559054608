// The ZAP handler's verdicts (RFC 27 frames in, frames out), without sockets.
#include "coordinator/zap_handler.h"

#include <gtest/gtest.h>

#include "control/curve_keys.h"

namespace tributary::coordinator {
namespace {

std::vector<std::string> request(std::string mechanism, std::vector<std::string> credentials,
                                 std::string domain = "tributary") {
  std::vector<std::string> f = {"1.0",      "7", std::move(domain),
                                "10.1.2.3", "",  std::move(mechanism)};
  f.insert(f.end(), credentials.begin(), credentials.end());
  return f;
}

std::string bytes(const CurveKey& k) { return {reinterpret_cast<const char*>(k.data()), k.size()}; }

TEST(ZapHandler, AdmitsOnlyTheClusterClientKey) {
  const auto keys = control::derive_curve_keys("secret");
  auto ok = parse_zap_request(request("CURVE", {bytes(keys.client.public_key)}));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->address, "10.1.2.3");
  const ZapVerdict yes = judge_zap_request(*ok, keys.client.public_key);
  EXPECT_TRUE(yes.allowed);
  EXPECT_EQ(zap_reply(*ok, yes), (std::vector<std::string>{"1.0", "7", "200", "OK", "", ""}));

  const auto other = control::derive_curve_keys("guess");
  struct Case {
    std::vector<std::string> frames;
    std::string why;
  };
  for (const auto& c :
       std::vector<Case>{{request("CURVE", {bytes(other.client.public_key)}), "does not derive"},
                         {request("CURVE", {bytes(keys.server.public_key)}), "does not derive"},
                         {request("NULL", {}), "mechanism NULL"},
                         {request("PLAIN", {"user", "password"}), "mechanism PLAIN"},
                         {request("CURVE", {"short"}), "malformed"},
                         {request("CURVE", {bytes(keys.client.public_key)}, "other"), "domain"}}) {
    auto r = parse_zap_request(c.frames);
    ASSERT_TRUE(r.is_ok());
    const ZapVerdict no = judge_zap_request(*r, keys.client.public_key);
    EXPECT_FALSE(no.allowed);
    EXPECT_NE(no.reason.find(c.why), std::string::npos) << no.reason;
    EXPECT_EQ(zap_reply(*r, no)[2], "400");
  }
}

TEST(ZapHandler, MalformedRequestsAreBadFrame) {
  EXPECT_EQ(parse_zap_request({"1.0", "1"}).status().code(), StatusCode::kBadFrame);
  EXPECT_EQ(parse_zap_request({"2.0", "1", "d", "a", "", "CURVE"}).status().code(),
            StatusCode::kBadFrame);
}

}  // namespace
}  // namespace tributary::coordinator
