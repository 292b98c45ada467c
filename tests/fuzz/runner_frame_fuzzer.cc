// libFuzzer target: the bytes a sandboxed program writes to its runner socket. Everything
// sandboxd decodes from a runner (length-prefixed frames, their JSON, the message shapes)
// must be refused with a status, never crash or overrun.
#include <cstddef>
#include <cstdint>

#include "sandboxd/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sandboxd::FrameDecoder decoder(1 << 20);
  // Two reads, split where the first byte says: frames arrive in pieces.
  const size_t split = size > 0 ? data[0] % (size + 1) : 0;
  decoder.Append(reinterpret_cast<const char*>(data), split);
  for (int pass = 0; pass < 2; ++pass) {
    for (;;) {
      // NextMessage is the daemon's path: the DOM-free file_data decoding, then the JSON
      // parse and ParseRunnerMessage (display bundles included) for everything else.
      auto message = decoder.NextMessage();
      if (!message.ok()) return 0;  // a broken stream: the decoder is not used again
      if (!message->has_value()) break;
    }
    if (pass == 0) decoder.Append(reinterpret_cast<const char*>(data) + split, size - split);
  }
  return 0;
}
