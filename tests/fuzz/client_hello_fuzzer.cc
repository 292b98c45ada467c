// libFuzzer target: the first bytes of an egress tunnel, read as a TLS ClientHello
// (services/sandboxd/egress/client_hello.h). Never reads out of bounds; a parsed hello's
// server name fits its 16-bit length; every prefix of an input that parses needs more or
// parses the same way once the whole hello is in.
#include <cstddef>
#include <cstdint>
#include <string>

#include "egress/client_hello.h"

using sandboxd::egress::ClientHello;
using sandboxd::egress::ParseClientHello;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const ClientHello hello = ParseClientHello(bytes);
  if (hello.state == ClientHello::kDone && hello.server_name && hello.server_name->size() > 0xffff) {
    __builtin_trap();
  }
  if ((hello.state == ClientHello::kNotTls || hello.state == ClientHello::kMalformed) &&
      hello.error.empty()) {
    __builtin_trap();
  }
  // Appending bytes never turns a finished parse into one that needs more.
  if (hello.state != ClientHello::kNeedMore &&
      ParseClientHello(bytes + "x").state == ClientHello::kNeedMore) {
    __builtin_trap();
  }
  return 0;
}
