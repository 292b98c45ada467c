// libFuzzer target: a resources/read URI from an MCP client. Whatever ParseOutFileUri
// accepts must name a file under out/ (no empty, "." or ".." segment, no NUL, valid UTF-8)
// of a well-named session or of a handle made of unreserved characters, never both, and
// must survive a round trip through OutFileUri or OutFileUriOfHandle.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_split.h"
#include "base/untrusted_json.h"
#include "bridge/produced_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string uri(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gateway::OutFileRef> ref = gateway::ParseOutFileUri(uri);
  if (!ref.ok()) return 0;
  if (ref->session.empty() == ref->handle.empty() || ref->path.empty()) __builtin_trap();
  for (char c : ref->session + ref->handle) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~')) {
      __builtin_trap();
    }
  }
  for (char c : ref->session) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) __builtin_trap();
  }
  if (ref->path.find('\0') != std::string::npos || !codemode::IsValidUtf8(ref->path)) __builtin_trap();
  for (absl::string_view part : absl::StrSplit(ref->path, '/')) {
    if (part.empty() || part == "." || part == "..") __builtin_trap();
  }
  absl::StatusOr<gateway::OutFileRef> again = gateway::ParseOutFileUri(
      ref->handle.empty() ? gateway::OutFileUri(ref->session, ref->path)
                          : gateway::OutFileUriOfHandle(ref->handle, ref->path));
  if (!again.ok() || again->session != ref->session || again->handle != ref->handle ||
      again->path != ref->path) {
    __builtin_trap();
  }
  return 0;
}
