#include "egress/client_hello.h"

#include <cstdint>
#include <set>

namespace sandboxd {
namespace egress {
namespace {

constexpr uint8_t kHandshakeRecord = 0x16;
constexpr uint8_t kClientHelloType = 0x01;
constexpr uint16_t kServerNameExtension = 0x0000;
constexpr uint16_t kEchExtension = 0xfe0d;

// A bounds-checked reader over one message: every read past the end sets `bad`.
class Reader {
 public:
  explicit Reader(absl::string_view s) : s_(s) {}
  bool bad() const { return bad_; }
  size_t left() const { return s_.size(); }
  uint32_t Int(size_t n) {
    if (!Has(n)) return 0;
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(s_[i]);
    s_.remove_prefix(n);
    return v;
  }
  absl::string_view Bytes(size_t n) {
    if (!Has(n)) return {};
    absl::string_view r = s_.substr(0, n);
    s_.remove_prefix(n);
    return r;
  }
  // A vector whose length takes `n` bytes.
  absl::string_view Vector(size_t n) { return Bytes(Int(n)); }

 private:
  bool Has(size_t n) {
    if (bad_ || s_.size() < n) bad_ = true;
    return !bad_;
  }
  absl::string_view s_;
  bool bad_ = false;
};

ClientHello Fail(ClientHello::State state, std::string error) {
  ClientHello r;
  r.state = state;
  r.error = std::move(error);
  return r;
}

// The server_name extension: a list of (type, name) holding exactly one entry (RFC 6066
// allows one name per type and defines host_name, type 0, only); a list of more is
// malformed, so that the name checked is the only name the server can read.
std::optional<std::string> ServerName(absl::string_view data, bool* bad) {
  Reader ext(data);
  Reader list(ext.Vector(2));
  const uint32_t type = list.Int(1);
  const absl::string_view name = list.Vector(2);
  *bad = ext.bad() || ext.left() > 0 || list.bad() || list.left() > 0;
  if (*bad || type != 0) return std::nullopt;
  return std::string(name);
}

ClientHello ParseHandshake(absl::string_view message) {
  Reader r(message);
  r.Int(1);                  // type, checked by the caller
  r.Int(3);                  // length, likewise
  r.Bytes(2 + 32);           // legacy_version, random
  r.Vector(1);               // legacy_session_id
  r.Vector(2);               // cipher_suites
  r.Vector(1);               // legacy_compression_methods
  ClientHello hello;
  hello.state = ClientHello::kDone;
  if (r.left() == 0 && !r.bad()) return hello;  // no extensions: no name
  Reader extensions(r.Vector(2));
  std::set<uint32_t> seen;  // an extension type appears once (RFC 8446, 4.2)
  while (!extensions.bad() && extensions.left() > 0) {
    const uint32_t type = extensions.Int(2);
    absl::string_view data = extensions.Vector(2);
    if (extensions.bad()) break;
    if (!seen.insert(type).second) {
      return Fail(ClientHello::kMalformed, "a ClientHello repeats an extension");
    }
    bool bad = false;
    if (type == kServerNameExtension) hello.server_name = ServerName(data, &bad);
    if (type == kEchExtension) hello.encrypted_client_hello = true;
    if (bad) return Fail(ClientHello::kMalformed, "a malformed server_name extension");
  }
  if (r.bad() || extensions.bad()) return Fail(ClientHello::kMalformed, "a truncated ClientHello");
  if (r.left() > 0) return Fail(ClientHello::kMalformed, "bytes after a ClientHello's extensions");
  return hello;
}

}  // namespace

ClientHello ParseClientHello(absl::string_view bytes) {
  // The handshake message may span several records: gather their payloads.
  std::string message;
  size_t needed = 4;  // the handshake header, then the whole message
  for (size_t records = 0; message.size() < needed; ++records) {
    if (records == kMaxClientHelloRecords) {
      return Fail(ClientHello::kMalformed, "a ClientHello in too many records");
    }
    if (bytes.empty()) return ClientHello();
    if (static_cast<uint8_t>(bytes[0]) != kHandshakeRecord) {
      return Fail(ClientHello::kNotTls, "the tunnel does not start with a TLS handshake");
    }
    if (bytes.size() < 5) return ClientHello();
    if (bytes[1] != 0x03) return Fail(ClientHello::kNotTls, "not a TLS record version");
    const size_t length = (static_cast<uint8_t>(bytes[3]) << 8) | static_cast<uint8_t>(bytes[4]);
    if (length == 0) return Fail(ClientHello::kMalformed, "an empty handshake record");
    if (bytes.size() < 5 + length) return ClientHello();
    message.append(bytes.data() + 5, length);
    bytes.remove_prefix(5 + length);
    if (message.size() >= 4 && needed == 4) {
      if (static_cast<uint8_t>(message[0]) != kClientHelloType) {
        return Fail(ClientHello::kNotTls, "the first handshake message is not a ClientHello");
      }
      needed = 4 + ((static_cast<uint8_t>(message[1]) << 16) |
                    (static_cast<uint8_t>(message[2]) << 8) | static_cast<uint8_t>(message[3]));
      if (needed > kMaxClientHelloBytes) {
        return Fail(ClientHello::kMalformed, "a ClientHello larger than the proxy reads");
      }
    }
  }
  // A client sends nothing else before the server's answer: more handshake bytes in the
  // ClientHello's records would be a second message the check never read.
  if (message.size() > needed) {
    return Fail(ClientHello::kMalformed, "another handshake message in the ClientHello's records");
  }
  return ParseHandshake(message);
}

}  // namespace egress
}  // namespace sandboxd
