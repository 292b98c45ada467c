// handle_bench: the cost of sealing and opening one sandbox handle (issue 23's target:
// verification within 10 us), against the gateway's other per-call work of the same kind
// (SHA-256 of a bearer token, which every authenticated request pays). Prints a markdown
// table of per-operation medians over 5 rounds of 20,000 operations each.
//
//   build/bench/handle_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "handles/sandbox_handle.h"
#include "server/http_token.h"

namespace {

constexpr int kRounds = 5;
constexpr int kOps = 20000;

// Median over rounds of the mean time of one call of `op`, in microseconds.
double MedianMicros(const std::function<void()>& op) {
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kOps; ++i) op();
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    rounds.push_back(took.count() / kOps);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

}  // namespace

int main() {
  gateway::HandleSealer::Key key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i);
  const gateway::HandleSealer sealer({key}, absl::Hours(24));
  const gateway::SandboxAddress address{"unix:/run/user/1000/sandboxd/sandboxd.sock", "s-0123456789abcdef"};
  const std::string credential = "token 3f2a9c01b7e4";
  const std::string handle = sealer.Seal(address, credential);
  std::string forged = handle;
  forged[20] = forged[20] == 'A' ? 'B' : 'A';
  volatile size_t sink = 0;
  struct Row {
    const char* what;
    std::function<void()> op;
  };
  const std::vector<Row> rows = {
      {"seal a handle (every run_python result)", [&] { sink = sink + sealer.Seal(address, credential).size(); }},
      {"open a valid handle (a run or read by handle)", [&] { sink = sink + sealer.Open(handle, credential).ok(); }},
      {"refuse another credential's handle", [&] { sink = sink + sealer.Open(handle, "token 000000000000").ok(); }},
      {"refuse an altered handle", [&] { sink = sink + sealer.Open(forged, credential).ok(); }},
      {"baseline: SHA-256 of a bearer token (every request)",
       [&] { sink = sink + gateway::CredentialOfToken("0123456789abcdef0123456789abcdef").size(); }},
  };
  std::printf("| operation | median us per call (%d x %d) |\n|---|---|\n", kRounds, kOps);
  for (const Row& row : rows) std::printf("| %s | %.2f |\n", row.what, MedianMicros(row.op));
  std::printf("\nhandle length: %zu characters\n", handle.size());
  return 0;
}
