// The server name of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3): what the egress proxy
// reads of a CONNECT tunnel before it relays, to refuse a tunnel to an allowed name that
// asks the server for another (docs/egress.md, "SNI").
//
//   ClientHello hello = ParseClientHello(first_bytes);
//   if (hello.state == ClientHello::kNeedMore) read more;   // at most kMaxClientHelloBytes
//   else if (hello.state == ClientHello::kDone && hello.server_name == host) relay;
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace sandboxd {
namespace egress {

// A ClientHello spans records up to this many bytes of handshake; larger is refused.
constexpr size_t kMaxClientHelloBytes = 32 << 10;
// And in at most this many records: tiny records would cost the proxy six bytes read per
// byte of handshake.
constexpr size_t kMaxClientHelloRecords = 64;

struct ClientHello {
  enum State { kNeedMore, kNotTls, kMalformed, kDone };
  State state = kNeedMore;
  std::optional<std::string> server_name;  // kDone: the host_name entry, as sent
  bool encrypted_client_hello = false;     // kDone: an ECH extension (its outer name is not the real one)
  std::string error;                       // kNotTls, kMalformed: what is wrong
};

// `bytes` are the first bytes of the tunnel, from the client, as they arrived.
ClientHello ParseClientHello(absl::string_view bytes);

}  // namespace egress
}  // namespace sandboxd
