// libFuzzer target: sandbox handles and request states from MCP clients (run_python's
// `sandbox`, handle URIs, a retry's `requestState`). No text a client makes up opens under a
// key it does not have; and whatever address and credential the input spells, sealing then
// opening gives them back, while opening for any other credential, or as the other kind
// (a handle as a state, a state as a handle), fails.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "handles/sandbox_handle.h"

namespace {

const gateway::HandleSealer& Sealer() {
  static const gateway::HandleSealer* sealer = [] {
    gateway::HandleSealer::Key key;
    for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i * 7 + 1);
    return new gateway::HandleSealer({key}, absl::Hours(1));
  }();
  return *sealer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (Sealer().Open(input, "token a").ok() || Sealer().Open(input, "").ok()) __builtin_trap();
  if (Sealer().OpenState(input, "token a").ok() || Sealer().OpenState(input, "").ok()) __builtin_trap();
  // endpoint \n session \n credential
  const size_t a = input.find('\n');
  const size_t b = a == std::string::npos ? std::string::npos : input.find('\n', a + 1);
  if (b == std::string::npos) return 0;
  const gateway::SandboxAddress address{input.substr(0, a), input.substr(a + 1, b - a - 1)};
  const std::string credential = input.substr(b + 1);
  const std::string handle = Sealer().Seal(address, credential);
  if (handle.empty()) {
    if (address.endpoint.size() <= gateway::HandleSealer::kMaxFieldBytes &&
        address.session_id.size() <= gateway::HandleSealer::kMaxFieldBytes) {
      __builtin_trap();
    }
    return 0;
  }
  absl::StatusOr<gateway::SandboxAddress> opened = Sealer().Open(handle, credential);
  if (!opened.ok() || !(*opened == address)) __builtin_trap();
  if (Sealer().Open(handle, credential + "x").ok()) __builtin_trap();
  if (Sealer().OpenState(handle, credential).ok()) __builtin_trap();
  const std::string state = Sealer().SealState(address.session_id, credential, absl::Minutes(5));
  if (state.empty()) return 0;
  absl::StatusOr<std::string> back = Sealer().OpenState(state, credential);
  if (!back.ok() || *back != address.session_id) __builtin_trap();
  if (Sealer().OpenState(state, credential + "x").ok() || Sealer().Open(state, credential).ok()) __builtin_trap();
  return 0;
}
