// Text a peer controls, on its way into a log line. Clients (tool names, methods, URIs,
// session ids, protocol versions), upstream servers (names, levels, data, error messages)
// and sandbox runners (frames, file paths) all reach our logs; unescaped, a "\n" in any of
// them forges whole log lines ("... info http: session 0123 deleted by the client") and an
// unbounded one fills the disk. Every such string goes through LogText:
//
//   spdlog::warn("mcp session {}: refused {}", key, codemode::LogText(tool_name));
//
// and a stream of log-worthy events a peer can trigger at will (an upstream's
// notifications/message) through a LogRateLimit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace codemode {

// Names, ids, methods, levels: 256 bytes. Error texts and data: kLogTextLongMax.
inline constexpr size_t kLogTextMax = 256;
inline constexpr size_t kLogTextLongMax = 1024;

// `text` made safe for one log line: control characters (C0, DEL, C1), the Unicode line
// and paragraph separators, bidi marks, embeddings, overrides and isolates, and invisible
// format characters (zero-width, word joiner, BOM) become escapes (\n, \r, \t, \xNN, \u{NNNN}),
// a backslash is doubled (so an escape in the output was made here, never by the peer),
// bytes that are not UTF-8 become \xNN. Output longer than `max` bytes is clipped at a
// character boundary and ends in "… (N bytes)", N being the length of `text`.
std::string LogText(absl::string_view text, size_t max = kLogTextMax);
// For error texts and data.
inline std::string LogLongText(absl::string_view text) { return LogText(text, kLogTextLongMax); }
// LogText for a text printed inside '...' in a line: its quotes escaped too (\'), so that
// the peer's text cannot close the quotes and add fields of its own (owner='x' status=200).
std::string LogQuoted(absl::string_view text, size_t max = kLogTextMax);

// A line of a library's own log (gRPC's through gpr_set_log_function, protobuf's through
// its SetLogHandler) into ours, as "<library>: <text>": errors at warning, the rest at
// debug, the text as LogLongText. At most ten such lines a second for all libraries
// together, in bursts of twenty, the next one allowed saying how many were dropped: a peer
// needs no token to fail a TLS handshake, and each failure is a line. A line below
// spdlog's level spends nothing.
// Thread-safe; may be called while the process exits.
void LogLibraryLine(absl::string_view library, bool error, absl::string_view text);

// A token bucket for log lines a peer can provoke: `per_second` lines a second on average,
// bursts of up to `burst` (0: max(1, per_second)). A rate of 0 lets nothing through.
// Thread-safe.
//
//   uint64_t dropped = 0;
//   if (!limit.Allow(absl::Now(), &dropped)) return;
//   if (dropped > 0) spdlog::info("dropped {} log messages from X", dropped);
class LogRateLimit {
 public:
  explicit LogRateLimit(double per_second, double burst = 0);
  LogRateLimit(const LogRateLimit&) = delete;
  LogRateLimit& operator=(const LogRateLimit&) = delete;

  // True when one line may be logged at `now`. Then `*dropped` is the number refused since
  // the previous line that was allowed (report it with this one); else it is untouched.
  bool Allow(absl::Time now, uint64_t* dropped) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const double per_second_;
  const double burst_;
  Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codemode
