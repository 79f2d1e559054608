// The join / resume challenge-response on both sides, driven by an attacker: the
// coordinator's JoinGate (challenges, proofs with attacker-chosen nonces and MACs, time)
// and the agent's Handshake (attacker-chosen challenges and accepts). Invariants: a proof
// is admitted only if it is the MAC of the secret over the challenge this gate issued for
// that connection; the gate's bounds hold; an agent accepts only a coordinator proof made
// with the secret over its own exchange.
#include <fuzzer/FuzzedDataProvider.h>

#include <map>

#include "control/codec.h"
#include "control/join_auth.h"
#include "control_client/handshake.h"
#include "coordinator/join_gate.h"
#include "core/check.h"

using namespace tributary;
using std::chrono::milliseconds;

namespace {

constexpr char kSecret[] = "fuzz-secret";
constexpr std::size_t kMaxPending = 4;
constexpr std::size_t kMaxPerSource = 2;

template <typename Array>
Array bytes(FuzzedDataProvider& in) {
  Array a{};
  const auto v = in.ConsumeBytes<std::uint8_t>(a.size());
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

struct Issued {
  Nonce nonce{};
  std::string name;
  membership::MemberId resume_id = 0;
};

void gate_step(FuzzedDataProvider& in, coordinator::JoinGate& gate, FakeClock& clock,
               std::map<std::string, Issued>& issued) {
  const std::string identity = "id" + std::to_string(in.ConsumeIntegralInRange(0, 6));
  const std::string source = "10.0.0." + std::to_string(in.ConsumeIntegralInRange(0, 2));
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: {
      const std::string name = in.ConsumeRandomLengthString(16);
      const membership::MemberId resume = in.ConsumeIntegralInRange<membership::MemberId>(0, 3);
      auto nonce =
          gate.challenge(identity, source, {name, "h", "z", "h:1", {}}, clock.now(), resume);
      if (nonce) issued[identity] = {*nonce, name, resume};
      break;
    }
    case 1: {  // an attacker's proof
      const Nonce client = bytes<Nonce>(in);
      const Mac mac = bytes<Mac>(in);
      auto admitted = gate.verify(identity, client, mac, clock.now());
      if (admitted) {
        const Issued& i = issued.at(identity);
        const Mac right =
            i.resume_id ? control::resume_proof_mac(kSecret, i.nonce, client, i.resume_id, i.name)
                        : control::join_proof_mac(kSecret, i.nonce, client, i.name);
        TRIB_CHECK(macs_equal(right, mac)) << "admitted a proof that is not the secret's MAC";
      }
      break;
    }
    case 2: {  // an honest proof for whatever this connection was challenged with
      auto it = issued.find(identity);
      if (it == issued.end()) break;
      const Nonce client = random_nonce();
      const Issued& i = it->second;
      const Mac mac = i.resume_id
                          ? control::resume_proof_mac(kSecret, i.nonce, client, i.resume_id, i.name)
                          : control::join_proof_mac(kSecret, i.nonce, client, i.name);
      (void)gate.verify(identity, client, mac, clock.now());
      break;
    }
    default:
      clock.advance(milliseconds(in.ConsumeIntegralInRange(0, 700)));
      gate.expire(clock.now());
  }
  TRIB_CHECK(gate.pending() <= kMaxPending) << "more handshakes open than allowed";
  for (int s = 0; s < 3; ++s)
    TRIB_CHECK(gate.pending_from("10.0.0." + std::to_string(s)) <= kMaxPerSource)
        << "one source holds more handshakes than allowed";
}

void agent_step(FuzzedDataProvider& in, control_client::Handshake& agent) {
  auto decoded = control::decode_envelope(in.ConsumeRandomLengthString(256));
  if (!decoded) return;
  const control::Envelope& env = *decoded;
  if (env.has_challenge()) {
    auto proof = agent.answer(env.challenge());
    if (proof) {
      TRIB_CHECK(proof->join_proof().mac().size() == sizeof(Mac)) << "proof of the wrong size";
    }
  } else if (env.has_join_accepted()) {
    // Accepted only with the secret's MAC, which the fuzzer cannot forge.
    TRIB_CHECK(!agent.verify(env.join_accepted()).is_ok())
        << "accepted a coordinator that did not prove the secret";
  } else if (env.has_join_rejected()) {
    TRIB_CHECK(!agent.rejection(env.join_rejected()).is_ok()) << "a rejection that is ok";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  FakeClock clock;
  coordinator::JoinGate gate(kSecret, milliseconds(500), kMaxPending, kMaxPerSource);
  std::map<std::string, Issued> issued;
  auto agent = in.ConsumeBool() ? control_client::Handshake::join(kSecret, "w0")
                                : control_client::Handshake::resume(kSecret, "w0", 7);
  while (in.remaining_bytes() > 0) {
    if (in.ConsumeBool()) {
      gate_step(in, gate, clock, issued);
    } else {
      agent_step(in, agent);
    }
  }
  return 0;
}
