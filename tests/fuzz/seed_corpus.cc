// Writes the seed inputs of every fuzzer: valid encodings made by the real encoders, so
// that fuzzing starts from inside each format rather than from random bytes. The checked-in
// corpora (tests/fuzz/corpus/<target>/) are these seeds merged with what long runs found
// (tests/fuzz/README.md). Usage: seed_corpus <corpus root>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "transport/tcp/frame.h"
#include "compression/codec_registry.h"
#include "control/codec.h"
#include "control/join_auth.h"
#include "membership/journal.h"

using namespace tributary;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& dir, const std::string& name, std::string_view bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename Bytes>
std::string_view view(const Bytes& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

void frames(const fs::path& root) {
  transport::FrameHeader h;
  h.epoch = 3;
  h.seq = 17;
  h.slot = 2;
  h.length = 1024;
  std::string header(view(transport::encode_frame_header(h)));
  header.push_back('\x01');  // the fuzzer's length limit byte
  write(root / "frame", "data_header", header);
  const auto abort = transport::encode_abort_frame(3, {StatusCode::kPeerLost, 1, "rank 1 lost"});
  write(root / "frame", "abort_payload",
        std::string_view(reinterpret_cast<const char*>(abort.data()) + transport::kFrameHeaderBytes,
                         abort.size() - transport::kFrameHeaderBytes - transport::kFrameTrailerBytes));
}

void data_handshakes(const fs::path& root) {
  using transport::HandshakeType;
  for (auto type : {transport::HandshakeType::kHello, transport::HandshakeType::kChallenge, transport::HandshakeType::kResponse,
                    transport::HandshakeType::kAccept, transport::HandshakeType::kReject}) {
    transport::HandshakeMessage m;
    m.type = type;
    m.epoch = 4;
    m.from_rank = 0;
    m.to_rank = 1;
    m.group_size = 3;
    m.nonce = random_nonce();
    m.reason = transport::RejectReason::kAuth;
    std::string bytes(view(transport::encode_handshake(m)));
    bytes += std::string(48, '\x5a');  // the acceptor nonce and the claimed MAC
    write(root / "data_handshake", "type" + std::to_string(static_cast<int>(type)), bytes);
  }
}

std::vector<control::Envelope> envelopes() {
  std::vector<control::Envelope> out(11);
  auto* j = out[0].mutable_join_request();
  j->set_protocol_version(control::kProtocolVersion);
  j->set_name("w0");
  j->set_host("h");
  j->set_data_address("10.0.0.1:7000");
  j->add_capabilities("tcp");
  out[1].mutable_challenge()->set_nonce(control::to_bytes(random_nonce()));
  out[2].mutable_join_proof()->set_client_nonce(control::to_bytes(random_nonce()));
  out[2].mutable_join_proof()->set_mac(std::string(32, 'm'));
  membership::View v;
  v.epoch = 7;
  v.members = {{11, 0, "a:1", "a", "z", {"tcp"}}, {12, 1, "b:2", "b", "z", {}}};
  v.ring = {0, 1};
  control::view_to_proto(v, out[3].mutable_view());
  auto* a = out[4].mutable_join_accepted();
  a->set_member_id(11);
  control::view_to_proto(v, a->mutable_view());
  a->set_coordinator_mac(std::string(32, 'c'));
  auto* r = out[5].mutable_ready();
  r->set_member_id(11);
  r->set_epoch(8);
  r->set_previous_epoch(7);
  r->set_committed_seq(41);
  r->set_held_seq(42);
  auto* g = out[6].mutable_go();
  g->set_epoch(8);
  g->set_commit_through(42);
  g->add_joiners(12);
  auto* f = out[7].mutable_failure_report();
  f->set_reporter(11);
  f->set_suspect(12);
  f->set_epoch(7);
  f->set_detail("peer lost");
  auto* t = out[8].mutable_step_timing();
  t->set_member_id(11);
  t->set_epoch(7);
  t->set_step(3);
  t->set_compute_seconds(0.25);
  *out[9].mutable_resume_request()->mutable_join() = out[0].join_request();
  out[9].mutable_resume_request()->set_member_id(11);
  // A delta that applies to the base the control codec fuzzer holds (ids 1..4).
  membership::View base;
  base.epoch = 3;
  for (std::uint32_t r = 0; r < 4; ++r) {
    base.members.push_back({r + 1, r, "127.0.0.1:1", "h", "z", {"tcp"}});
    base.ring.push_back(r);
  }
  membership::View next = base;
  next.epoch = 4;
  next.members.erase(next.members.begin() + 1);
  next.members.push_back({9, 0, "127.0.0.1:2", "h", "z", {"tcp"}});
  next.ring = {0, 1, 2, 3};
  for (std::uint32_t r = 0; r < 4; ++r) next.members[r].rank = r;
  control::view_delta_to_proto(*membership::make_delta(base, next), out[10].mutable_view_delta());
  return out;
}

void control_messages(const fs::path& root) {
  int i = 0;
  for (const auto& e : envelopes()) {
    const std::string bytes = control::encode_envelope(e);
    write(root / "control_codec", "envelope" + std::to_string(i), bytes);
    // The join handshake fuzzer reads: a bool, then steps; agent steps carry an envelope.
    std::string step = std::string("\x01\x00", 2) + static_cast<char>(bytes.size()) + bytes;
    write(root / "join_handshake", "envelope" + std::to_string(i++), step);
  }
  write(root / "control_codec", "zap_request",
        std::string("1.0\0"
                    "1\0"
                    "tributary\0"
                    "10.0.0.1\0"
                    "\0"
                    "CURVE\0",
                    31) +
            std::string(32, 'k'));
}

void journals(const fs::path& root) {
  std::string file;
  membership::JournalEntry counter{3, 0, {}};
  file += membership::encode_journal_entry(counter);
  membership::JournalEntry view{
      3, 2, {{1, {"a", "h", "z", "h:1", {"tcp"}}}, {3, {"c", "h", "z", "h:2", {}}}}};
  file += membership::encode_journal_entry(view);
  write(root / "journal", "two_records", file);
  write(root / "journal", "torn_tail", file.substr(0, file.size() - 5));
}

void codec_payloads(const fs::path& root) {
  std::vector<float> x(300);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  for (const char* spec :
       {"float32", "float16", "bfloat16", "qint8:bucket=64", "qint4:bucket=64", "sign:bucket=64",
        "topk:density=0.1", "qint8:zstd", "topk:density=0.5,zstd"}) {
    auto codec = compression::make_codec(spec);
    if (!codec) {
      std::cerr << spec << ": " << codec.status().to_string() << "\n";
      continue;
    }
    std::vector<std::byte> out((*codec)->max_encoded_bytes(x.size()));
    compression::EncodeOptions o;
    o.seed = 1;
    std::vector<float> residual(x.size(), 0.0f), momentum(x.size(), 0.0f);
    if ((*codec)->wants_error_feedback()) o.residual = residual;
    if ((*codec)->wants_momentum()) o.momentum = momentum;
    auto n = (*codec)->encode(x.data(), DType::kFloat32, x.size(), out, o);
    if (!n) {
      std::cerr << spec << ": " << n.status().to_string() << "\n";
      continue;
    }
    write(root / "codec", spec, std::string_view(reinterpret_cast<const char*>(out.data()), *n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: seed_corpus <corpus root>\n";
    return 2;
  }
  const fs::path root = argv[1];
  frames(root);
  data_handshakes(root);
  control_messages(root);
  journals(root);
  codec_payloads(root);
  // The membership fuzzer reads random event sequences; any bytes are a start.
  write(root / "membership", "seed", std::string(512, '\x07'));
  return 0;
}
