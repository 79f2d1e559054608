// OpenSSL behind the data plane's TLS (transport/tcp/tls.h): a context per endpoint (its
// certificates loaded once) and a stream per connection, driven without blocking on the
// connection's own socket so that the TcpLink's poll(2) loop keeps its shape. Internal to
// agent/; OpenSSL's headers stay in tls_stream.cc.
//
// Guarantees:
// - TLS 1.3 only. Pre-shared-key mode: the PSK is the caller's (derived per connection from
//   the cluster secret and the handshake transcript, frame.h), with (EC)DHE on top; no
//   certificate is offered or accepted. Certificate mode: both sides present a certificate
//   and verify the peer's against the CA (SSL_VERIFY_PEER | FAIL_IF_NO_PEER_CERT).
// - Non-blocking: every call returns at once with kWantRead / kWantWrite when the socket
//   has to become readable / writable first. write() takes partial writes
//   (ENABLE_PARTIAL_WRITE) and retries with a moved buffer (ACCEPT_MOVING_WRITE_BUFFER):
//   after kWantWrite the caller must offer the same bytes again, from wherever they are.
// - Records can sit decrypted inside OpenSSL where poll(2) does not see them:
//   has_pending() says so, and a reader drains until kWantRead.
// - kError / kClosed are sticky; error() says why in words an operator can act on
//   ("peer presented no certificate", "PSK mismatch (wrong cluster secret?)", ...).
// - The stream does not own the socket: closing it stays the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/tcp/tls.h"
#include "core/auth.h"
#include "core/clock.h"
#include "core/status.h"

struct ssl_st;
struct ssl_ctx_st;

namespace tributary::transport {

class TlsContext {
 public:
  // Loads and checks the certificate, key and CA when given; kInvalidArgument naming the
  // file and OpenSSL's reason otherwise.
  static Result<std::shared_ptr<TlsContext>> create(const TlsConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool uses_certificates() const { return certificates_; }
  ssl_ctx_st* native() const { return ctx_; }

 private:
  TlsContext(ssl_ctx_st* ctx, bool certificates) : ctx_(ctx), certificates_(certificates) {}
  ssl_ctx_st* ctx_;
  bool certificates_;
};

enum class TlsIo : std::uint8_t { kOk, kWantRead, kWantWrite, kClosed, kError };

class TlsStream {
 public:
  // Over the connected socket `fd`; `client`: the side that dialed. `psk` is used in
  // pre-shared-key mode only.
  static Result<std::shared_ptr<TlsStream>> create(std::shared_ptr<TlsContext> context, int fd,
                                                   bool client, const Mac& psk);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  TlsIo handshake();
  // kOk with *got > 0 bytes, or nothing read.
  TlsIo read(std::byte* dst, std::size_t len, std::size_t* got);
  // kOk with *put > 0 bytes (maybe fewer than len), or nothing written.
  TlsIo write(const std::byte* src, std::size_t len, std::size_t* put);
  bool has_pending() const;
  bool client() const { return client_; }
  bool uses_psk() const { return !context_->uses_certificates(); }
  const std::string& error() const { return error_; }
  // "TLS_AES_128_GCM_SHA256 (pre-shared key)", for the log once connected.
  std::string description() const;

 private:
  TlsStream(std::shared_ptr<TlsContext> context, ssl_st* ssl, bool client, const Mac& psk);
  TlsIo fail(int ret);

  std::shared_ptr<TlsContext> context_;
  ssl_st* ssl_;
  bool client_;
  Mac psk_;
  TlsIo end_ = TlsIo::kOk;  // sticky kClosed / kError
  std::string error_;
};

// One connection's TLS setup, for run_tls_handshakes().
struct TlsHandshake {
  TlsStream* stream = nullptr;
  int fd = -1;
  std::string peer;  // "rank R at ADDR", for errors
  Status status;     // out: ok, kAuthFailed with the reason, or kTimedOut
};

// Runs every handshake at once (one poll loop: a member is client to some peers and
// server to others, so one at a time could deadlock) and then exchanges one confirmation
// record each way, so that a side whose certificate the other refused learns it here
// (TLS 1.3 lets a client finish before the server has checked its certificate). Stops at
// `deadline`. Returns the first failure (each handshake's own is in its status) or ok.
Status run_tls_handshakes(std::vector<TlsHandshake>& handshakes, Deadline deadline);

}  // namespace tributary::transport
