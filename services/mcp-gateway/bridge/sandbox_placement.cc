// SandboxClient's placement: what each endpoint's GetInfo says of its load, asked of all
// at once, and the order a new sandbox tries them in (sandbox_client.h).
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bridge/sandbox_client.h"
#include "bridge/sandboxd_endpoints.h"

namespace gateway {
namespace {

// GetInfo's deadline for placement; an endpoint that lets it pass (cut off, stalled) is not
// asked again for kSilentPause, so new sandboxes go elsewhere without waiting for it each
// time until the channel's keepalive finds it gone.
constexpr auto kInfoDeadline = std::chrono::milliseconds(500);
constexpr absl::Duration kSilentPause = absl::Seconds(2);

}  // namespace

std::vector<size_t> PlacementOrder(const std::vector<EndpointLoad>& loads) {
  auto tier = [](const EndpointLoad& l) {
    if (l.failed_recently) return 3;
    if (!l.answered) return 2;
    if (!l.serving || !l.runtime_unavailable.empty()) return 5;
    if (l.max_sessions > 0 && l.sessions >= l.max_sessions) return 4;
    return l.stuck ? 1 : 0;
  };
  auto used = [](const EndpointLoad& l) {
    return l.max_sessions == 0 ? 0.0 : static_cast<double>(l.sessions) / l.max_sessions;
  };
  std::vector<size_t> order(loads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const EndpointLoad& x = loads[a];
    const EndpointLoad& y = loads[b];
    if (tier(x) != tier(y)) return tier(x) < tier(y);
    if (used(x) != used(y)) return used(x) < used(y);
    if (x.pool_ready != y.pool_ready) return x.pool_ready > y.pool_ready;
    return x.created < y.created;
  });
  return order;
}

std::string DescribeLoad(const EndpointLoad& l) {
  std::string d = l.answered ? absl::StrCat(l.sessions, "/", l.max_sessions, " sessions, ", l.pool_ready, " warm")
                             : "not answered";
  if (l.answered && !l.serving) absl::StrAppend(&d, ", not serving");
  if (!l.runtime_unavailable.empty()) absl::StrAppend(&d, ", runtime unavailable");
  if (l.stuck) absl::StrAppend(&d, ", stuck");
  if (l.failed_recently) absl::StrAppend(&d, ", failed lately");
  absl::StrAppend(&d, ", ", l.created, " created by us");
  return d;
}

void ReadLoad(const sandbox::v1::Info& info, const std::string& runtime, EndpointLoad* load) {
  load->answered = true;
  load->serving = info.serving();
  load->sessions = info.sessions();
  load->max_sessions = info.max_sessions();
  const std::string want = runtime.empty() ? "python" : runtime;
  load->pool_ready = want == "python" ? info.pool_ready() : 0;
  for (const sandbox::v1::PoolInfo& pool : info.pools()) {
    if (pool.runtime() != want) continue;
    load->pool_ready = pool.ready();
    load->runtime_unavailable = pool.unavailable();
  }
}

std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> SandboxClient::Infos() {
  const std::vector<size_t> members = Members();
  std::vector<std::optional<sandbox::v1::Info>> infos = InfosOf(members);
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> named;
  for (size_t k = 0; k < members.size(); ++k) named.emplace_back(endpoints_->Name(members[k]), std::move(infos[k]));
  return named;
}

std::vector<std::optional<sandbox::v1::Info>> SandboxClient::InfosOf(const std::vector<size_t>& members,
                                                                     bool skip_silent) {
  const size_t n = members.size();
  std::vector<std::optional<sandbox::v1::Info>> infos(n);
  struct Ask {
    SandboxdEndpoints::StubPtr stub;  // held while the call is out
    grpc::ClientContext ctx;
    sandbox::v1::Info info;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Ask>> asks(n);
  grpc::CompletionQueue cq;
  const sandbox::v1::GetInfoRequest request;
  size_t asked = 0;
  for (size_t i = 0; i < n; ++i) {
    if (skip_silent && absl::Now() - endpoints_->silent_at(members[i]) < kSilentPause) continue;
    asks[i] = std::make_unique<Ask>();
    Ask& ask = *asks[i];
    endpoints_->Prepare(ask.ctx, members[i], std::chrono::system_clock::now() + kInfoDeadline);
    ask.stub = endpoints_->InfoStub(members[i]);
    ask.stub->AsyncGetInfo(&ask.ctx, request, &cq)->Finish(&ask.info, &ask.status, reinterpret_cast<void*>(i));
    ++asked;
  }
  for (size_t k = 0; k < asked; ++k) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    const size_t i = reinterpret_cast<size_t>(tag);
    Ask& ask = *asks[i];
    if (ok && ask.status.ok()) infos[i] = std::move(ask.info);
    endpoints_->Heard(members[i], ask.status);
  }
  ShutdownAndDrain(cq);
  return infos;
}

grpc::Status SandboxClient::CreateWhileAnswering(size_t i, grpc::ClientContext& ctx,
                                                 const sandbox::v1::CreateSessionRequest& req,
                                                 sandbox::v1::Session* session) {
  enum Tag : intptr_t { kCreate = 1, kInfo = 2 };
  grpc::CompletionQueue cq;
  grpc::ClientContext info_ctx;
  endpoints_->Prepare(info_ctx, i, std::chrono::system_clock::now() + kInfoDeadline);
  sandbox::v1::Info info;
  grpc::Status created, asked;
  const SandboxdEndpoints::StubPtr stub = endpoints_->StubNow(i);
  stub->AsyncCreateSession(&ctx, req, &cq)->Finish(session, &created, reinterpret_cast<void*>(kCreate));
  // On the GetInfo channel, as placement's own: an answer past kMaxInfoBytes is not taken.
  const SandboxdEndpoints::StubPtr info_stub = endpoints_->InfoStub(i);
  info_stub->AsyncGetInfo(&info_ctx, {}, &cq)->Finish(&info, &asked, reinterpret_cast<void*>(kInfo));
  bool create_done = false, info_done = false, silent = false;
  while (!create_done) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    if (tag == reinterpret_cast<void*>(kCreate)) {
      create_done = true;
    } else {
      info_done = true;
      silent = asked.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      endpoints_->Heard(i, asked);
      if (silent) ctx.TryCancel();  // the create ends CANCELLED at once
    }
  }
  if (!info_done) info_ctx.TryCancel();
  ShutdownAndDrain(cq);
  if (silent && !created.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("it did not answer GetInfo within ", kInfoDeadline.count(), " ms"));
  }
  return created;
}

std::vector<EndpointLoad> SandboxClient::Loads(const std::vector<size_t>& members, const std::string& runtime) {
  const size_t n = members.size();
  std::vector<EndpointLoad> loads(n);
  for (size_t i = 0; i < n; ++i) {
    loads[i].created = endpoints_->created(members[i]);
    loads[i].failed_recently = absl::Now() - endpoints_->failed_at(members[i]) < kFailedCreatePenalty;
    loads[i].stuck = loads_->Stuck(members[i]);
  }
  const std::vector<std::optional<sandbox::v1::Info>> infos = loads_->Infos(members);
  for (size_t i = 0; i < n; ++i) {
    if (infos[i]) ReadLoad(*infos[i], runtime, &loads[i]);
  }
  return loads;
}

std::optional<std::string> SandboxClient::RuntimeUnavailable(const std::string& runtime) {
  std::vector<std::string> why;
  const std::vector<size_t> members = Members();
  const std::vector<EndpointLoad> loads = Loads(members, runtime);
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i].answered || loads[i].runtime_unavailable.empty()) return std::nullopt;
    why.push_back(absl::StrCat(endpoints_->Name(members[i]), ": ", loads[i].runtime_unavailable));
  }
  if (why.empty()) return std::nullopt;
  return absl::StrJoin(why, "; ");
}

void ShutdownAndDrain(grpc::CompletionQueue& cq) {
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
}

bool DaemonWasFull(const grpc::Status& status, const grpc::ClientContext& ctx) {
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return false;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto refusal = trailers.find("sandbox-refusal");
  return refusal != trailers.end() && refusal->second == "daemon-full";
}

bool EndpointAtFault(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

}  // namespace gateway
