// What a dead wasm-tier session's last words (the last lines of its stderr, which sandboxd
// returns to the client) may tell: nothing of the host's memory layout or file system.
#pragma once

#include <string>

namespace sandboxd {

// The last lines of a session's stderr file that say something: not the jail's layers
// line, not Node's warnings about its own flags, not a stack trace's frames; read from its
// last 16 KiB, redacted as below, at most 600 bytes.
std::string WasmLastWords(const std::string& log_path);

// `text` with every hex number of 8 digits or more (a V8 object's or a native frame's
// address) as `0x…` and every absolute path (the runner's, Node's, the workspace's on the
// host) as its base name (`…` for one that ends in '/').
std::string RedactWasmLastWords(const std::string& text);

}  // namespace sandboxd
