// handle_bench: the gateway's per-call work that needs no daemon. The cost of sealing and
// opening one sandbox handle (issue 23's target: verification within 10 us), of the approval
// gate for a tool call the policy allows (issue 24's target: within 5 us, with 10 upstreams
// of 100 tools each and an operator's glob rules), of a 2026-07-28 run's hand-off to a
// thread of its own (pending_runs.h), against the gateway's other per-call work of the same
// kind (SHA-256 of a bearer token, which every authenticated request pays). Prints a
// markdown table of per-operation medians over 5 rounds of 20,000 operations each.
//
//   build/bench/handle_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "adapter/pending_runs.h"
#include "adapter/client_asker.h"
#include "bridge/run_approvals.h"
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

  // The approval gate as a run meets it: 10 upstreams of 100 tools, rules with globs.
  std::vector<gateway::UpstreamStatus> view;
  for (int s = 0; s < 10; ++s) {
    gateway::UpstreamStatus server;
    server.name = "server" + std::to_string(s);
    for (int t = 0; t < 100; ++t) {
      gateway::UpstreamTool tool;
      tool.name = (t % 10 == 0 ? "delete_item_" : "get_item_") + std::to_string(t);
      tool.annotations = {{"readOnlyHint", t % 10 != 0}, {"destructiveHint", t % 10 == 0}};
      server.tools.push_back(tool);
    }
    view.push_back(server);
  }
  gateway::ApprovalRules rules;
  rules.allow = {"get_*", "list_*", "search_*", "read_?tem"};
  rules.ask = {"delete_*", "*_repo", "push_*", "create_*"};
  rules.deny = {"drop_*", "*_database"};
  std::map<std::string, gateway::ApprovalRules> per_server;
  for (const auto& server : view) per_server[server.name] = rules;
  const gateway::ApprovalPolicy policy(per_server, std::nullopt);
  gateway::ToolCallContext ctx;
  ctx.credential = credential;
  gateway::ClientAsker asker(&ctx);
  gateway::RunApprovals approvals(&policy, {}, {&view, &asker, nullptr, ctx.credential, "run_python", /*trace_id=*/""});
  const nlohmann::json arguments = {{"id", 42}, {"fields", {"name", "owner"}}};
  auto cancel = std::make_shared<codemode::CancelToken>();

  // A 2026-07-28 run: its own thread and context, the request waiting for its result.
  gateway::PendingRuns pending(&sealer, {});
  gateway::ToolCallContext request;
  request.credential = credential;
  request.cancel = cancel;
  const nlohmann::json run_args = {{"code", "print(1)"}};
  const gateway::PendingRuns::Work work = [](gateway::ToolCallContext&) -> absl::StatusOr<nlohmann::json> {
    return nlohmann::json::object();
  };
  struct Row {
    const char* what;
    std::function<void()> op;
  };
  const std::vector<Row> rows = {
      {"seal a handle (every run_python result)", [&] { sink = sink + sealer.Seal(address, credential).size(); }},
      {"open a valid handle (a run or read by handle)", [&] { sink = sink + sealer.Open(handle, credential).ok(); }},
      {"refuse another credential's handle", [&] { sink = sink + sealer.Open(handle, "token 000000000000").ok(); }},
      {"refuse an altered handle", [&] { sink = sink + sealer.Open(forged, credential).ok(); }},
      {"approval gate: a call the policy allows (server9.get_item_99)",
       [&] { sink = sink + approvals.Check("server9", "get_item_99", arguments, cancel).ok(); }},
      {"2026-07-28 run that may ask: hand-off to a run worker and back", [&] {
         sink = sink + pending.Start(work, "run_python", run_args, request).ok();
       }},
      {"baseline: SHA-256 of a bearer token (every request)",
       [&] { sink = sink + gateway::CredentialOfToken("0123456789abcdef0123456789abcdef").size(); }},
  };
  std::printf("| operation | median us per call (%d x %d) |\n|---|---|\n", kRounds, kOps);
  for (const Row& row : rows) std::printf("| %s | %.2f |\n", row.what, MedianMicros(row.op));
  std::printf("\nhandle length: %zu characters\n", handle.size());
  return 0;
}
