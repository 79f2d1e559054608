#include "transport/tcp/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tributary::transport {
namespace {

// The PSK's identity on the wire: fixed, it names the derivation, not a member.
constexpr unsigned char kPskIdentity[] = "tributary/tls-psk/v1";
constexpr std::size_t kPskIdentityBytes = sizeof(kPskIdentity) - 1;
// Both ends send it once their handshake is done; see run_tls_handshakes().
constexpr char kConfirm[8] = {'T', 'R', 'B', 'T', 'L', 'S', 'O', 'K'};
// OpenSSL reads records ahead into a buffer this large (fewer read(2)s for big payloads).
constexpr std::size_t kReadBufferBytes = 64 * 1024;

std::string openssl_reason(unsigned long e) {
  const char* r = ERR_reason_error_string(e);
  if (r != nullptr) return r;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// The oldest error of the thread's queue (the cause; later ones are consequences).
unsigned long first_error() {
  unsigned long first = 0;
  while (const unsigned long e = ERR_get_error()) {
    if (first == 0) first = e;
  }
  return first;
}

// The PSK as a TLS 1.3 session (what OpenSSL's external-PSK callbacks hand over).
SSL_SESSION* psk_session(SSL* ssl, const Mac& psk) {
  static constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) != 1 ||
      SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, std::size_t* idlen,
            SSL_SESSION** session) {
  const Mac& psk = *static_cast<const Mac*>(SSL_get_app_data(ssl));
  SSL_SESSION* s = psk_session(ssl, psk);
  if (s == nullptr) return 0;
  if (md != nullptr && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    SSL_SESSION_free(s);  // the server picked a suite of another hash: no PSK for it
    *session = nullptr;
    return 1;
  }
  *id = kPskIdentity;
  *idlen = kPskIdentityBytes;
  *session = s;
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* identity, std::size_t identity_len,
             SSL_SESSION** session) {
  *session = nullptr;
  if (identity_len != kPskIdentityBytes ||
      std::memcmp(identity, kPskIdentity, kPskIdentityBytes) != 0) {
    return 1;  // not ours: no PSK, and with no certificate the handshake fails
  }
  const Mac& psk = *static_cast<const Mac*>(SSL_get_app_data(ssl));
  *session = psk_session(ssl, psk);
  return *session != nullptr ? 1 : 0;
}

// The socket as OpenSSL's BIO, but writing with MSG_NOSIGNAL: OpenSSL's own socket BIO
// write(2)s, and a peer that closed first would raise SIGPIPE and end the process (the
// plaintext path sends with MSG_NOSIGNAL for the same reason).
int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

int bio_write(BIO* b, const char* buf, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::send(fd_of(b), buf, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* buf, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(fd_of(b), buf, static_cast<std::size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

BIO* socket_bio(int fd) {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tributary socket");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  BIO* b = BIO_new(method);
  if (b == nullptr) return nullptr;
  BIO_set_data(b, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(b, 1);
  return b;
}

std::string file_error(const std::string& what, const std::string& file) {
  return what + " '" + file + "': " + openssl_reason(first_error());
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::create(const TlsConfig& config) {
  TRIB_RETURN_IF_ERROR(validate_tls_config(config));
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) return error(StatusCode::kInternal, "cannot create a TLS context");
  std::shared_ptr<TlsContext> out(new TlsContext(ctx, config.uses_certificates()));
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_num_tickets(ctx, 0);  // no resumption: every connection derives its own keys
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadBufferBytes);
  if (!config.uses_certificates()) {
    // SHA-256 suites only: the PSK session is TLS_AES_128_GCM_SHA256's hash.
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256");
    return out;
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1) {
    return error(StatusCode::kInvalidArgument, file_error("--tls-cert", config.cert_file));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return error(StatusCode::kInvalidArgument, file_error("--tls-key", config.key_file));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return error(StatusCode::kInvalidArgument,
                 file_error("--tls-key does not match --tls-cert", config.key_file));
  }
  if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) {
    return error(StatusCode::kInvalidArgument, file_error("--tls-ca", config.ca_file));
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

TlsStream::TlsStream(std::shared_ptr<TlsContext> context, SSL* ssl, bool client, const Mac& psk)
    : context_(std::move(context)), ssl_(ssl), client_(client), psk_(psk) {}

Result<std::shared_ptr<TlsStream>> TlsStream::create(std::shared_ptr<TlsContext> context, int fd,
                                                     bool client, const Mac& psk) {
  SSL* ssl = SSL_new(context->native());
  if (ssl == nullptr) return tributary::error(StatusCode::kInternal, "cannot create a TLS connection");
  std::shared_ptr<TlsStream> s(new TlsStream(context, ssl, client, psk));
  BIO* bio = socket_bio(fd);
  if (bio == nullptr) return tributary::error(StatusCode::kInternal, "cannot attach TLS to a socket");
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by the SSL from here
  if (!context->uses_certificates()) {
    SSL_set_app_data(ssl, &s->psk_);
    if (client) {
      SSL_set_psk_use_session_callback(ssl, use_psk);
    } else {
      SSL_set_psk_find_session_callback(ssl, find_psk);
    }
  }
  if (client) {
    SSL_set_connect_state(ssl);
  } else {
    SSL_set_accept_state(ssl);
  }
  return s;
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

TlsIo TlsStream::fail(int ret) {
  const int e = SSL_get_error(ssl_, ret);
  if (e == SSL_ERROR_WANT_READ) return TlsIo::kWantRead;
  if (e == SSL_ERROR_WANT_WRITE) return TlsIo::kWantWrite;
  const int saved_errno = errno;
  const unsigned long first = first_error();
  const int reason = ERR_GET_REASON(first);
  if (e == SSL_ERROR_ZERO_RETURN ||
      (e == SSL_ERROR_SSL && reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
      (e == SSL_ERROR_SYSCALL && first == 0 && saved_errno == 0)) {
    error_ = "the peer closed the connection";
    end_ = TlsIo::kClosed;
    return end_;
  }
  end_ = TlsIo::kError;
  if (e == SSL_ERROR_SYSCALL) {
    error_ = first != 0 ? openssl_reason(first) : std::string(std::strerror(saved_errno));
    return end_;
  }
  const std::string text = openssl_reason(first);
  const bool psk = !context_->uses_certificates();
  switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      error_ = "the peer's certificate does not verify against --tls-ca: " +
               std::string(X509_verify_cert_error_string(SSL_get_verify_result(ssl_)));
      break;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      error_ = "peer presented no certificate";
      break;
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      error_ = "the peer requires a certificate and we presented none (" + text + ")";
      break;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
      error_ = "the peer refused our certificate (" + text + ")";
      break;
    case SSL_R_BINDER_DOES_NOT_VERIFY:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:
      error_ = psk ? "PSK mismatch (wrong cluster secret?): " + text : text;
      break;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
      error_ = "the peer does not speak TLS 1.3 on this connection (" + text + ")";
      break;
    case SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC:
      error_ = "a TLS record fails its authentication (" + text + "): altered in transit";
      break;
    default:
      error_ = text;
  }
  return end_;
}

TlsIo TlsStream::handshake() {
  if (end_ != TlsIo::kOk) return end_;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  return ret == 1 ? TlsIo::kOk : fail(ret);
}

TlsIo TlsStream::read(std::byte* dst, std::size_t len, std::size_t* got) {
  *got = 0;
  if (end_ != TlsIo::kOk) return end_;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_read_ex(ssl_, dst, len, got);
  return ret == 1 ? TlsIo::kOk : fail(ret);
}

TlsIo TlsStream::write(const std::byte* src, std::size_t len, std::size_t* put) {
  *put = 0;
  if (end_ != TlsIo::kOk) return end_;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_write_ex(ssl_, src, len, put);
  return ret == 1 ? TlsIo::kOk : fail(ret);
}

bool TlsStream::has_pending() const { return end_ == TlsIo::kOk && SSL_has_pending(ssl_) == 1; }

std::string TlsStream::description() const {
  const SSL_CIPHER* c = SSL_get_current_cipher(ssl_);
  return std::string(c != nullptr ? SSL_CIPHER_get_name(c) : "?") +
         (context_->uses_certificates() ? " (certificates)" : " (pre-shared key)");
}

namespace {

enum class Phase : std::uint8_t { kHandshake, kSendConfirm, kReadConfirm, kDone, kFailed };

struct Progress {
  Phase phase = Phase::kHandshake;
  std::size_t confirm_done = 0;  // bytes of kConfirm written, then read
  char confirm[sizeof kConfirm] = {};
  short events = 0;              // what poll has to wait for
};

void fail_handshake(TlsHandshake& h, Progress& p, const std::string& why) {
  p.phase = Phase::kFailed;
  h.status = error(StatusCode::kAuthFailed, "TLS with " + h.peer + " failed: " + why);
}

// Advances one connection as far as it goes without blocking.
void step(TlsHandshake& h, Progress& p) {
  auto want = [&](TlsIo r) {
    if (r == TlsIo::kWantRead || r == TlsIo::kWantWrite) {
      p.events = r == TlsIo::kWantRead ? POLLIN : POLLOUT;
      return true;
    }
    fail_handshake(h, p, h.stream->error());
    return true;
  };
  for (;;) {
    switch (p.phase) {
      case Phase::kHandshake: {
        const TlsIo r = h.stream->handshake();
        if (r != TlsIo::kOk && want(r)) return;
        p.phase = Phase::kSendConfirm;
        break;
      }
      case Phase::kSendConfirm: {
        std::size_t put = 0;
        const TlsIo r =
            h.stream->write(reinterpret_cast<const std::byte*>(kConfirm) + p.confirm_done,
                            sizeof kConfirm - p.confirm_done, &put);
        if (r != TlsIo::kOk && want(r)) return;
        p.confirm_done += put;
        if (p.confirm_done == sizeof kConfirm) {
          p.phase = Phase::kReadConfirm;
          p.confirm_done = 0;
        }
        break;
      }
      case Phase::kReadConfirm: {
        std::size_t got = 0;
        const TlsIo r = h.stream->read(reinterpret_cast<std::byte*>(p.confirm) + p.confirm_done,
                                       sizeof kConfirm - p.confirm_done, &got);
        if (r != TlsIo::kOk && want(r)) return;
        p.confirm_done += got;
        if (p.confirm_done < sizeof kConfirm) break;
        if (std::memcmp(p.confirm, kConfirm, sizeof kConfirm) != 0) {
          return fail_handshake(h, p, "the peer's first record is not the TLS confirmation");
        }
        p.phase = Phase::kDone;
        return;
      }
      case Phase::kDone:
      case Phase::kFailed: return;
    }
  }
}

}  // namespace

Status run_tls_handshakes(std::vector<TlsHandshake>& handshakes, Deadline deadline) {
  std::vector<Progress> progress(handshakes.size());
  std::vector<pollfd> fds;
  std::vector<std::size_t> which;
  for (;;) {
    fds.clear();
    which.clear();
    for (std::size_t i = 0; i < handshakes.size(); ++i) {
      Progress& p = progress[i];
      if (p.phase == Phase::kDone || p.phase == Phase::kFailed) continue;
      step(handshakes[i], p);
      if (p.phase == Phase::kDone || p.phase == Phase::kFailed) continue;
      fds.push_back(pollfd{handshakes[i].fd, p.events, 0});
      which.push_back(i);
    }
    if (fds.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) {
      for (std::size_t i : which) {
        progress[i].phase = Phase::kFailed;
        handshakes[i].status =
            error(StatusCode::kTimedOut, "TLS with " + handshakes[i].peer +
                                             " not established by the deadline (the peer sent "
                                             "nothing more: does it run --tls the same way?)");
      }
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.at - now);
    const int ms = static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000));
    if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) {
      return error(StatusCode::kInternal, std::string("poll: ") + std::strerror(errno));
    }
  }
  for (const TlsHandshake& h : handshakes) {
    if (!h.status.is_ok()) return h.status;
  }
  return Status();
}

}  // namespace tributary::transport
