// SandboxClient implementation: channels with fast reconnect, unary calls with deadlines,
// and the Execute stream loop.
#include "bridge/sandbox_client.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/notification.h"
#include "absl/time/time.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "bridge/sandboxd_endpoints.h"
#include "bridge/tool_call_dispatcher.h"
#include "metrics/stage_times.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// What a create's status says for LoadWatch: the endpoint answered it (made a sandbox, or
// refused), or not (the try's deadline, the gateway giving it up, no connection).
LoadWatch::Ended CreateEnded(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::OK:
      return LoadWatch::Ended::kCreated;
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAVAILABLE:
      return LoadWatch::Ended::kNoAnswer;
    default:
      return LoadWatch::Ended::kRefused;
  }
}

constexpr auto kUnaryDeadline = std::chrono::seconds(60);
// How long an endpoint outside the placement set keeps its channels after its last call.
// Short: dialling again costs one connection, while an address DNS listed for a moment
// (pods replaced, a name that churns) would otherwise hold its channels and a descriptor
// reconnecting to it until the channel's idle timeout (SandboxdEndpoints::kIdleTimeout).
constexpr absl::Duration kReleaseUnused = absl::Seconds(5);
// A create waits for a warm container or starts one (1.6 s cold under gVisor, measured):
// one that takes longer is an endpoint in trouble, and the next one is tried in what is
// left of it.
constexpr auto kCreateDeadline = std::chrono::seconds(20);
// Endpoints one new sandbox tries, in placement order, within kCreateDeadline in all.
constexpr size_t kMaxCreateTries = 4;
// One try's deadline while another endpoint is left to try (a cold gVisor create takes
// 1.6 s; a burst of them several).
constexpr auto kCreateTryDeadline = std::chrono::seconds(10);

std::chrono::system_clock::time_point Deadline(std::chrono::seconds d) {
  return std::chrono::system_clock::now() + d;
}

// A file call's deadline: the caller's, within the unary one.
std::chrono::system_clock::time_point FileDeadline(absl::Time deadline) {
  const auto unary = Deadline(kUnaryDeadline);
  return deadline == absl::InfiniteFuture() ? unary : std::min(unary, absl::ToChronoTime(deadline));
}

// A call's ClientContext for a cancel that may come after the call ended (the token
// belongs to the MCP request): TryCancel reaches the context only until Clear(), which the
// call's owner runs before the context goes.
class ContextRef {
 public:
  explicit ContextRef(grpc::ClientContext* ctx) : ctx_(ctx) {}
  void TryCancel() {
    codemode::MutexLock lock(&mu_);
    if (ctx_) ctx_->TryCancel();
  }
  void Clear() {
    codemode::MutexLock lock(&mu_);
    ctx_ = nullptr;
  }

 private:
  codemode::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_);
};

// Cancels a call's ClientContext when its token is cancelled (sandboxd sees the call
// cancelled and stops waiting on the sandbox for it), for as long as the link lives.
class CancelLink {
 public:
  CancelLink(const std::shared_ptr<codemode::CancelToken>& cancel, grpc::ClientContext* ctx)
      : context_(std::make_shared<ContextRef>(ctx)) {
    if (cancel) cancel->OnCancel([context = context_] { context->TryCancel(); });
  }
  ~CancelLink() { context_->Clear(); }
  CancelLink(const CancelLink&) = delete;
  CancelLink& operator=(const CancelLink&) = delete;

 private:
  std::shared_ptr<ContextRef> context_;
};

}  // namespace

SandboxClient::SandboxClient(std::vector<std::string> endpoints, ToolCallLimits limits,
                             sandbox::v1::Isolation isolation, std::string image,
                             std::string tcp_token, const SandboxdTls& tls)
    : SandboxClient(std::make_unique<Membership>(std::move(endpoints), SystemResolver()), limits, isolation,
                    std::move(image), std::move(tcp_token), tls) {
  membership_->Start();
}

SandboxClient::SandboxClient(std::unique_ptr<Membership> membership, ToolCallLimits limits,
                             sandbox::v1::Isolation isolation, std::string image,
                             std::string tcp_token, const SandboxdTls& tls)
    : SandboxClient(std::move(membership), limits, isolation, std::move(image), std::move(tcp_token), tls,
                    SandboxdEndpoints::kIdleTimeout) {}

SandboxClient::SandboxClient(std::unique_ptr<Membership> membership, ToolCallLimits limits,
                             sandbox::v1::Isolation isolation, std::string image,
                             std::string tcp_token, const SandboxdTls& tls,
                             std::chrono::milliseconds idle_timeout)
    : membership_(std::move(membership)),
      endpoints_(std::make_unique<SandboxdEndpoints>(tls, std::move(tcp_token), idle_timeout)),
      loads_(std::make_unique<LoadWatch>(
          [this](const std::vector<size_t>& members) { return InfosOf(members, /*skip_silent=*/true); },
          [this] { return Members(); }, LoadWatch::Options{})),
      limits_(limits),
      budget_(limits.shared),
      isolation_(isolation),
      image_(std::move(image)) {
  (void)Members();  // the fixed endpoints first, numbered as configured
  // Releases follow DNS also while no sandbox is placed or listed: a quiet gateway lets go
  // of the channels of addresses that left, as a busy one does.
  membership_->AfterEachResolution([this] { (void)Members(); });
}

// The resolving thread calls Members(), which uses endpoints_: it ends first.
SandboxClient::~SandboxClient() { membership_->Stop(); }

std::string SandboxClient::EndpointName(size_t endpoint) const { return endpoints_->Name(endpoint); }

std::optional<size_t> SandboxClient::FindEndpoint(const std::string& name) const {
  if (std::optional<size_t> i = endpoints_->Find(name)) return i;
  // An address of a sealed handle: a gateway placed a sandbox there (docs/scaling.md).
  if (membership_->MayDial(name)) return endpoints_->Add(name);
  return std::nullopt;
}

bool SandboxClient::EndpointInUse(size_t endpoint) const { return endpoints_->InUse(endpoint); }

bool SandboxClient::EndpointDialled(size_t endpoint) const { return endpoints_->dialled(endpoint); }

std::vector<size_t> SandboxClient::Members() {
  const size_t known = endpoints_->size();
  std::vector<size_t> members;
  for (const std::string& name : membership_->Current()) members.push_back(endpoints_->Add(name));
  // An endpoint first seen now (configured, or an address DNS just added) is connected to at
  // once: the placement that follows asks it GetInfo within kInfoDeadline, and one that
  // lets that pass while its handshake runs is passed over for a while.
  for (size_t i : members) {
    if (i >= known) endpoints_->ConnectForPlacement(i);
  }
  // Addresses that left the set, once no call has used them for a while, keep a record and
  // not their channels (a handle naming one dials it again).
  endpoints_->Release(members, kReleaseUnused);
  return members;
}

// Whether a call's status came from the host: not one gRPC gives a call that did not get
// there (refused, cut off past its deadline, given up).
static bool Reached(const grpc::Status& s) {
  return s.error_code() != grpc::StatusCode::UNAVAILABLE &&
         s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED && s.error_code() != grpc::StatusCode::CANCELLED;
}

absl::Status SandboxClient::CallEnded(const grpc::Status& s, size_t endpoint) {
  if (Reached(s)) endpoints_->Answered(endpoint);
  return Convert(s, endpoint);
}

absl::Status SandboxClient::Convert(const grpc::Status& s, size_t endpoint) const {
  if (s.ok()) return absl::OkStatus();
  std::string message = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message = absl::StrCat("sandboxd at ", endpoints_->Name(endpoint), " is unavailable: ", message);
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), message);
}

absl::StatusOr<SandboxRef> SandboxClient::CreateSession(const std::string& owner,
                                                        const std::string& label,
                                                        const sandbox::v1::Catalog& catalog,
                                                        const Room& room,
                                                        const std::string& runtime,
                                                        const std::string& egress_policy) {
  const absl::Time placing = absl::Now();
  const std::vector<size_t> members = Members();
  if (members.empty()) {
    membership_->Trouble();
    return absl::UnavailableError(
        "no sandboxd endpoint to place a new sandbox on: --sandboxd's DNS names have not resolved to any "
        "address yet (the gateway's log says why)");
  }
  // One endpoint needs no choice (and no GetInfo round trip).
  const std::vector<EndpointLoad> loads =
      members.size() == 1 ? std::vector<EndpointLoad>(1) : Loads(members, runtime);
  const std::vector<size_t> order = members.size() == 1 ? std::vector<size_t>{0} : PlacementOrder(loads);
  if (limits_.metrics != nullptr) limits_.metrics->SandboxPlaced(absl::Now() - placing);
  if (members.size() > 1 && spdlog::should_log(spdlog::level::debug)) {
    std::string read;
    for (size_t k : order) {
      absl::StrAppend(&read, read.empty() ? "" : "; ", endpoints_->Name(members[k]), " (", DescribeLoad(loads[k]), ")");
    }
    spdlog::debug("placing a new sandbox, in this order: {}", read);
  }
  // Fall through to the next endpoint while one cannot make it: an endpoint that reports
  // room but fails every create must not get every new sandbox. Within one deadline and
  // kMaxCreateTries endpoints: DNS may list many that are gone.
  const auto give_up = Deadline(kCreateDeadline);
  absl::Status last = absl::UnavailableError("no sandboxd endpoint could be tried in time");
  const size_t candidates = std::min(order.size(), kMaxCreateTries);
  for (size_t tried = 0; tried < candidates; ++tried) {
    if (std::chrono::system_clock::now() >= give_up) break;
    const size_t i = members[order[tried]];
    const bool last_candidate = tried + 1 == candidates;
    grpc::ClientContext ctx;
    // A try that hangs (a host whose podman is stuck) leaves the next one time to succeed.
    endpoints_->Prepare(ctx, i, last_candidate ? give_up : std::min(give_up, Deadline(kCreateTryDeadline)));
    ctx.set_wait_for_ready(false);
    sandbox::v1::CreateSessionRequest req;
    req.set_owner(owner);
    req.set_label(label);
    req.set_isolation(isolation_);
    req.set_image(image_);
    req.set_runtime(runtime);
    req.set_egress_policy(egress_policy);
    // An owner at its limit gives up its least recently used idle sandbox rather than being
    // refused: clients that address sandboxes by handle never say when they are done with
    // one (docs/gateway.md, "Sandbox handles"). The limit is the credential's, counted by
    // sandboxd, so it holds for sandboxes of every gateway replica, stateless or not.
    req.set_reclaim_idle(room.reclaim_idle);
    req.set_max_owner_sessions(room.owner_limit);
    *req.mutable_catalog() = catalog;
    sandbox::v1::Session session;
    // The only endpoint gets a channel in reconnect backoff time to connect; with several,
    // one that is down fails at once, and one that is cut off (its channel up, its link
    // not) is given up when its GetInfo, asked beside the create, lets its deadline pass;
    // the last candidate is waited for (a slow link is not a lost one).
    const absl::Time sent = loads_->Placing(i);  // counted in its load while the create is out
    grpc::Status st = members.size() == 1 || last_candidate
                          ? endpoints_->Stub(i)->CreateSession(&ctx, req, &session)
                          : CreateWhileAnswering(i, ctx, req, &session);
    loads_->PlaceDone(i, sent, CreateEnded(st));
    last = CallEnded(st, i);
    if (st.ok()) {
      endpoints_->Created(i);
      return SandboxRef{i, session.id(), runtime};
    }
    if (DaemonWasFull(st, ctx)) continue;  // no fault of its own: the next may have room
    if (!EndpointAtFault(st.error_code())) break;  // the request's own fault, or its owner's limit
    if (endpoints_->Failed(i)) {  // the first failure, then once a penalty while it fails
      spdlog::warn("sandboxd at {}: a new sandbox failed there ({}: {}); new sandboxes try the other endpoints "
                   "first for {}", endpoints_->Name(i), static_cast<int>(st.error_code()),
                   codemode::LogLongText(st.error_message()), absl::FormatDuration(kFailedCreatePenalty));
    }
    membership_->Trouble();  // DNS may know better by now (a replaced pod, a removed node)
  }
  return last;
}

absl::Status SandboxClient::DeleteSession(const SandboxRef& ref) {
  grpc::ClientContext ctx;
  endpoints_->Prepare(ctx, ref.endpoint, Deadline(std::chrono::seconds(10)));
  sandbox::v1::DeleteSessionRequest req;
  req.set_session_id(ref.session_id);
  sandbox::v1::DeleteSessionResponse resp;
  return CallEnded(endpoints_->Stub(ref.endpoint)->DeleteSession(&ctx, req, &resp), ref.endpoint);
}

absl::Status SandboxClient::ResetSession(const SandboxRef& ref) {
  grpc::ClientContext ctx;
  endpoints_->Prepare(ctx, ref.endpoint, Deadline(kUnaryDeadline));
  sandbox::v1::ResetSessionRequest req;
  req.set_session_id(ref.session_id);
  sandbox::v1::Session resp;
  return CallEnded(endpoints_->Stub(ref.endpoint)->ResetSession(&ctx, req, &resp), ref.endpoint);
}

absl::Status SandboxClient::UploadFile(const SandboxRef& ref, const std::string& path,
                                       const std::string& data,
                                       std::shared_ptr<codemode::CancelToken> cancel) {
  constexpr size_t kChunk = 1u << 20;
  grpc::ClientContext ctx;
  endpoints_->Prepare(ctx, ref.endpoint, Deadline(kUnaryDeadline));
  CancelLink link(cancel, &ctx);
  sandbox::v1::FileInfo info;
  const SandboxdEndpoints::StubPtr stub = endpoints_->Stub(ref.endpoint);  // held while the stream lasts
  std::unique_ptr<grpc::ClientWriter<sandbox::v1::UploadFileRequest>> writer = stub->UploadFile(&ctx, &info);
  sandbox::v1::UploadFileRequest req;
  req.mutable_start()->set_session_id(ref.session_id);
  req.mutable_start()->set_path(path);
  bool open = writer->Write(req);
  for (size_t off = 0; open && off < data.size(); off += kChunk) {
    req.set_data(data.substr(off, kChunk));
    open = writer->Write(req);  // false: sandboxd ended the call early (Finish says why)
  }
  writer->WritesDone();
  return CallEnded(writer->Finish(), ref.endpoint);
}

// Every endpoint in use at once, each within 5 s: one that refuses answers at once; a
// silent one, or one whose packets are dropped, costs the list up to 5 s, however many.
Sandboxes::Owned SandboxClient::ListOwned(const std::string& owner, absl::Time deadline,
                                           std::shared_ptr<codemode::CancelToken> cancel) {
  const auto until = std::min(Deadline(std::chrono::seconds(5)), absl::ToChronoTime(deadline));
  struct Ask {
    SandboxdEndpoints::StubPtr stub;  // held while the call is out
    grpc::ClientContext ctx;
    std::unique_ptr<CancelLink> link;  // before ctx goes
    sandbox::v1::ListSessionsResponse resp;
    grpc::Status status;
  };
  // The placement set, and every other endpoint that served a sandbox's call within its
  // idle timeout (an address gone from DNS whose handles are still used). Asking is not a
  // use: listings alone do not keep an address asked, or dialled.
  std::vector<size_t> endpoints = Members();
  for (size_t i : endpoints_->Serving()) {
    if (std::find(endpoints.begin(), endpoints.end(), i) == endpoints.end()) endpoints.push_back(i);
  }
  std::sort(endpoints.begin(), endpoints.end());
  const size_t asked = endpoints.size();
  std::vector<std::unique_ptr<Ask>> asks(asked);
  grpc::CompletionQueue cq;
  sandbox::v1::ListSessionsRequest req;
  req.set_owner(owner);
  for (size_t k = 0; k < asked; ++k) {
    const size_t i = endpoints[k];
    asks[k] = std::make_unique<Ask>();
    Ask& ask = *asks[k];
    // Not wait_for_ready: an endpoint that refuses connections answers UNAVAILABLE at once
    // instead of holding the list to its deadline (reconnection backs off at most 1 s, so
    // one that is back is soon asked again); a connection attempt to one whose packets are
    // dropped (cut off, gone) lasts up to the channel's 5 s, which the deadline bounds.
    endpoints_->Prepare(ask.ctx, i, until);
    ask.ctx.set_wait_for_ready(false);
    ask.link = std::make_unique<CancelLink>(cancel, &ask.ctx);
    ask.stub = endpoints_->ListStub(i);
    ask.stub->AsyncListSessions(&ask.ctx, req, &cq)->Finish(&ask.resp, &ask.status, reinterpret_cast<void*>(k));
  }
  for (size_t k = 0; k < asked; ++k) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    if (!ok) asks[reinterpret_cast<size_t>(tag)]->status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "not sent");
  }
  ShutdownAndDrain(cq);
  Owned owned;
  for (size_t k = 0; k < asked; ++k) {
    const size_t i = endpoints[k];
    if (!asks[k]->status.ok()) {
      owned.complete = false;
      owned.missing.push_back(absl::StrCat(endpoints_->Name(i), ": ",
                                           Convert(asks[k]->status, i).ToString()));
      continue;
    }
    std::vector<const sandbox::v1::Session*> ready;
    for (const sandbox::v1::Session& session : asks[k]->resp.sessions()) {
      if (session.state() == sandbox::v1::Session::READY && session.owner() == owner) ready.push_back(&session);
    }
    std::sort(ready.begin(), ready.end(), [](const auto* a, const auto* b) {
      return std::make_pair(a->created_at_ms(), a->id()) < std::make_pair(b->created_at_ms(), b->id());
    });
    for (const auto* session : ready) {
      owned.refs.push_back(SandboxRef{i, session->id(), session->runtime().empty() ? "python" : session->runtime()});
      owned.executions.push_back(session->executions());
    }
  }
  return owned;
}

absl::StatusOr<sandbox::v1::ListFilesResponse> SandboxClient::ListFiles(const SandboxRef& ref,
                                                                       const std::string& path,
                                                                       uint32_t max_entries,
                                                                       absl::Time deadline,
                                                                       std::shared_ptr<codemode::CancelToken> cancel) {
  grpc::ClientContext ctx;
  endpoints_->Prepare(ctx, ref.endpoint, FileDeadline(deadline));
  CancelLink link(cancel, &ctx);
  sandbox::v1::ListFilesRequest req;
  req.set_session_id(ref.session_id);
  req.set_path(path);
  req.set_max_entries(max_entries);
  sandbox::v1::ListFilesResponse resp;
  absl::Status s = CallEnded(endpoints_->Stub(ref.endpoint)->ListFiles(&ctx, req, &resp), ref.endpoint);
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<std::string> SandboxClient::DownloadFile(const SandboxRef& ref,
                                                        const std::string& path,
                                                        size_t max_bytes,
                                                        absl::Time deadline,
                                                        std::shared_ptr<codemode::CancelToken> cancel) {
  grpc::ClientContext ctx;
  endpoints_->Prepare(ctx, ref.endpoint, FileDeadline(deadline));
  CancelLink link(cancel, &ctx);
  sandbox::v1::DownloadFileRequest req;
  req.set_session_id(ref.session_id);
  req.set_path(path);
  const SandboxdEndpoints::StubPtr stub = endpoints_->Stub(ref.endpoint);  // held while the stream lasts
  std::unique_ptr<grpc::ClientReader<sandbox::v1::FileChunk>> reader = stub->DownloadFile(&ctx, req);
  std::string data;
  sandbox::v1::FileChunk chunk;
  while (reader->Read(&chunk)) {
    if (data.size() + chunk.data().size() > max_bytes) {
      ctx.TryCancel();  // stop sandboxd sending the rest
      (void)reader->Finish();
      endpoints_->Answered(ref.endpoint);
      return absl::ResourceExhaustedError(absl::StrCat(
          path, " is larger than the ", max_bytes, " bytes that can be read at once"));
    }
    data += chunk.data();
  }
  absl::Status s = CallEnded(reader->Finish(), ref.endpoint);
  if (!s.ok()) return s;
  return data;
}

namespace {

// Writes one Execute stream for its loop, its tool-call workers and a cancel, which may
// come after the stream ended (such writes are dropped).
struct StreamWriter {
  codemode::Mutex mu;  // held for the whole of a write: one blocks while sandboxd does not read
  bool done ABSL_GUARDED_BY(mu) = false;
  grpc::ClientReaderWriter<sandbox::v1::ExecuteRequest, sandbox::v1::ExecuteResponse>* stream;
  codemode::Notification ended;  // sandboxd ended the stream (or the call failed)
  void Write(const sandbox::v1::ExecuteRequest& req) {
    codemode::MutexLock lock(&mu);
    if (!done) stream->Write(req);
  }
  // Later writes are dropped; waits for a write in progress.
  void Close() {
    codemode::MutexLock lock(&mu);
    done = true;
    stream->WritesDone();
  }
};

// Cancels an execution without ever waiting on its stream. Normally the `cancel` message
// goes out at once and sandboxd ends the stream with `finished` (CANCELLED, or
// SESSION_LOST once code that ignores the interrupt is killed after sandboxd's
// --kill_grace). But code that reads none of its tool calls' answers can back the stream
// up: a write of an answer blocks holding the writer, the Execute loop waits behind it,
// and a cancel written behind them would wait until sandboxd's timeout ends the run. So
// the message is written by a thread of its own, and when the stream has not ended within
// `grace` the call itself is cancelled: the blocked writes fail, and sandboxd interrupts
// the code as for a caller that went away (and kills it when it does not stop). Both run
// on `threads`, which Execute stops before it returns: a cancel after that is refused
// there, and has nothing left to stop.
void CancelExecution(codemode::ThreadPool& threads, const std::shared_ptr<StreamWriter>& writer,
                     const std::shared_ptr<ContextRef>& context, absl::Duration grace) {
  if (writer->ended.HasBeenNotified()) return;  // a cancel after the run: nothing to stop
  (void)threads.Schedule([writer] {
    sandbox::v1::ExecuteRequest req;
    req.mutable_cancel();
    writer->Write(req);
  });
  (void)threads.Schedule([writer, context, grace] {
    if (writer->ended.WaitForNotificationWithTimeout(grace)) return;
    spdlog::warn("a cancelled run's Execute stream did not end within {} "
                 "(--sandbox_cancel_grace): cancelling the call to sandboxd",
                 absl::FormatDuration(grace));
    context->TryCancel();
  });
}

codemode::ThreadPoolOptions CancelOptions() {
  codemode::ThreadPoolOptions o;
  o.name = "execute cancel";
  o.max_threads = 2;  // the cancel's write and its grace
  return o;
}

// The Execute stream's first message.
sandbox::v1::ExecuteRequest StartRequest(const SandboxRef& ref, const std::string& code, uint32_t timeout_ms,
                                         const sandbox::v1::Catalog* catalog, const std::string& runtime,
                                         uint32_t max_in_flight) {
  sandbox::v1::ExecuteRequest start;
  start.mutable_start()->set_session_id(ref.session_id);
  start.mutable_start()->set_code(code);
  start.mutable_start()->set_timeout_ms(timeout_ms);
  // sandboxd's backstop: code of another language than the session's never runs there.
  start.mutable_start()->set_runtime(runtime);
  // The sandbox holds back calls past this many, so a flood waits there instead of
  // being refused here.
  start.mutable_start()->set_max_tool_calls_in_flight(max_in_flight);
  if (catalog) *start.mutable_start()->mutable_catalog() = *catalog;
  return start;
}

}  // namespace

absl::StatusOr<sandbox::v1::Finished> SandboxClient::Execute(
    const SandboxRef& ref, const std::string& code, uint32_t timeout_ms,
    const sandbox::v1::Catalog* catalog, const ExecuteHandlers& handlers,
    std::shared_ptr<codemode::CancelToken> cancel) {
  grpc::ClientContext ctx;
  // The server enforces the execution timeout; this deadline only guards against a
  // sandboxd that stops answering altogether.
  endpoints_->Prepare(ctx, ref.endpoint,
          std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms) +
              std::chrono::seconds(60));
  // W3C trace context over gRPC, as OpenTelemetry's propagators carry it: sandboxd's log
  // lines of this execution name the trace.
  if (!handlers.traceparent.empty()) ctx.AddMetadata("traceparent", handlers.traceparent);
  const SandboxdEndpoints::StubPtr stub = endpoints_->Stub(ref.endpoint);  // held while the stream lasts
  auto stream = stub->Execute(&ctx);
  // Shared with the cancel callback, which may fire after we return.
  auto writer = std::make_shared<StreamWriter>();
  writer->stream = stream.get();
  auto context = std::make_shared<ContextRef>(&ctx);
  auto write = [writer](const sandbox::v1::ExecuteRequest& req) { writer->Write(req); };

  write(StartRequest(ref, code, timeout_ms, catalog, handlers.runtime, limits_.max_in_flight));
  StageTimes::Mark(Stage::kStartWritten);
  // Shared with the cancel callback too; stopped (its threads joined) before we return.
  auto cancel_threads = std::make_shared<codemode::ThreadPool>(CancelOptions());
  if (cancel) {
    cancel->OnCancel([cancel_threads, writer, context, grace = limits_.cancel_grace] {
      CancelExecution(*cancel_threads, writer, context, grace);
    });
  }

  // Made at the execution's first tool call: most runs make none.
  std::optional<ToolCallDispatcher> calls;
  std::optional<sandbox::v1::Finished> finished;
  sandbox::v1::ExecuteResponse msg;
  while (stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case sandbox::v1::ExecuteResponse::kOutput:
        if (handlers.on_output) {
          handlers.on_output(msg.output().stream() == sandbox::v1::Output::STDERR,
                             msg.output().text());
        }
        break;
      case sandbox::v1::ExecuteResponse::kToolCall:
        if (!calls) calls.emplace(limits_, &budget_, handlers, write);
        calls->Dispatch(std::move(*msg.mutable_tool_call()));
        break;
      case sandbox::v1::ExecuteResponse::kFinished:
        StageTimes::Mark(Stage::kFinishedRead);
        finished = msg.finished();
        break;
      default:
        break;
    }
  }
  StageTimes::Mark(Stage::kStreamEnded);
  writer->ended.Notify();
  if (handlers.on_stream_end) handlers.on_stream_end();
  writer->Close();
  // Late answers of tool-call threads are dropped by the writer.
  if (calls) calls->JoinAll();
  // The stream ended and its writer is closed: a cancel's write is dropped, its grace ends.
  cancel_threads->Stop();
  grpc::Status st = stream->Finish();
  context->Clear();  // a late cancel's fallback must not reach `ctx` once it is gone
  if (finished || Reached(st)) endpoints_->Answered(ref.endpoint);
  if (finished) return *finished;
  if (st.ok()) return absl::InternalError("sandboxd ended the stream without 'finished'");
  if (st.error_code() == grpc::StatusCode::CANCELLED && cancel && cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(
        "the run was cancelled (", cancel->reason(), "); sandboxd did not end it within ",
        absl::FormatDuration(limits_.cancel_grace), " (--sandbox_cancel_grace), so the call to "
        "sandboxd was cancelled, which interrupts the code"));
  }
  return Convert(st, ref.endpoint);
}

}  // namespace gateway
