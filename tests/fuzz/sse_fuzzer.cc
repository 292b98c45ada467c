// libFuzzer target: an upstream's Server-Sent Events stream, fed to the gateway's parser
// in two chunks (split where the first byte says), with a small event size limit.
#include <cstddef>
#include <cstdint>

#include "upstream/http_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gateway::SseParser parser(4096);
  size_t events = 0, bytes = 0;
  auto handler = [&](const gateway::SseParser::Event& e) {
    ++events;
    bytes += e.data.size() + e.id.size() + e.event.size();
    if (e.data.size() > 4096) __builtin_trap();  // the limit must hold for every event
  };
  const char* text = reinterpret_cast<const char*>(data);
  const size_t split = size > 0 ? data[0] % (size + 1) : 0;
  if (parser.Feed(text, split, handler)) parser.Feed(text + split, size - split, handler);
  return 0;
}
