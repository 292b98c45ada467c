// The run core: one run from its request down to the sandbox and back. See run_service.h.
#include "bridge/run_service.h"

#include <openssl/rand.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "metrics/stage_times.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;

// The sandbox session is gone (its container was killed, sandboxd restarted without it).
// What sandboxd's "session lost" says of a session a full daemon ended for another owner.
constexpr char kReclaimedForAnotherOwner[] = "reclaimed: for another owner";

bool SessionGone(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsFailedPrecondition(s);
}

// RunServiceOptions::handles, or a sealer with a random key of this process.
std::shared_ptr<const HandleSealer> SealerOrOwn(std::shared_ptr<const HandleSealer> given) {
  if (given) return given;
  HandleSealer::Key key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    throw std::runtime_error("cannot read random bytes for the sandbox handle key");
  }
  return std::make_shared<HandleSealer>(std::vector<HandleSealer::Key>{key}, absl::Hours(24));
}

// The approval gate counts into the run's metrics.
RunServiceOptions WithMetricsWired(RunServiceOptions options) {
  options.approval.metrics = options.metrics.get();
  return options;
}

// How a run ended, for the runs metric: from what Execute returned.
RunOutcome OutcomeOf(const absl::StatusOr<Finished>& finished) {
  if (!finished.ok()) {
    const absl::Status& s = finished.status();
    if (absl::IsCancelled(s)) return RunOutcome::kCancelled;
    if (absl::IsInvalidArgument(s) || absl::IsResourceExhausted(s) || absl::IsNotFound(s) ||
        absl::IsPermissionDenied(s) || absl::IsFailedPrecondition(s)) {
      return RunOutcome::kRefused;
    }
    return RunOutcome::kFailed;
  }
  switch (finished->status()) {
    case Finished::OK: return RunOutcome::kOk;
    case Finished::ERROR: return RunOutcome::kError;
    case Finished::TIMEOUT: return RunOutcome::kTimeout;
    case Finished::CANCELLED: return RunOutcome::kCancelled;
    default: return RunOutcome::kFailed;
  }
}

// The code of a run's arguments, as far as it is one (for a refused run's audit line).
std::string CodeOf(const json& arguments) {
  const auto code = arguments.is_object() ? arguments.find("code") : arguments.end();
  return code != arguments.end() && code->is_string() ? code->get<std::string>() : "";
}

}  // namespace

// One run as it goes down to the sandbox.
struct RunService::RunState {
  const RunRequest* request;
  const LanguageSpec* language;
  RunArguments args;
  std::shared_ptr<const RunCatalog> catalog;
  std::shared_ptr<codemode::CancelToken> end;  // ends the execution (the request's cancel or the router's)
  ToolCallRouter* router;
  RunProgress* progress;
  RunReport* report;
  RunSandbox* sandbox;  // the sandbox the run is in, for its calls and its audit line
  std::string traceparent;  // the run's span, for sandboxd (gRPC metadata)
};

// Where a run's binding comes from, and how a lost one is let go: the MCP session's
// binding of the run's name, or the binding of a handle's sandbox (attempt 0) and a new
// one (attempt 1, when that sandbox is gone), or a new one for a stateless request.
struct RunService::Placement {
  std::function<absl::StatusOr<std::shared_ptr<SessionBindings::Binding>>(int attempt)> find;
  std::function<void(const std::shared_ptr<SessionBindings::Binding>&)> forget;
  // Called once the binding's sandbox exists (a stateless binding is then kept by address).
  std::function<void(const std::shared_ptr<SessionBindings::Binding>&)> opened;
  // The run came by handle: its notes do not repeat sandboxd's messages, which name the
  // session id the handle keeps from the client.
  bool by_handle = false;
};

RunService::RunService(Sandboxes* sandboxes, Upstreams* upstreams, RunServiceOptions options)
    : sandboxes_(sandboxes),
      upstreams_(upstreams),
      options_(WithMetricsWired(options)),
      handles_(SealerOrOwn(options.handles)),
      policy_(options.approvals ? options.approvals : std::make_shared<const ApprovalPolicy>()),
      bindings_(sandboxes, options.max_named_sessions, options.max_sandboxes_per_credential,
                options.cap_credentials_in_sandboxd, options.egress),
      resources_(sandboxes, &bindings_, options.resources,
                 [this](const std::string& handle, const std::string& credential) {
                   return OpenHandle(handle, credential);
                 }),
      owned_(sandboxes, &bindings_, options.owned_scope, options.resources,
             [this](const SandboxRef& ref, const std::string& credential) {
               return handles_->Seal({sandboxes_->EndpointName(ref.endpoint), ref.session_id, ref.runtime},
                                     credential);
             }),
      watch_([this](const std::string& credential,
                    const std::shared_ptr<codemode::CancelToken>& cancel) { return owned_.Fingerprint(credential, cancel); },
             options.resources_poll_interval, options.resources_look_timeout) {}

RunService::~RunService() = default;

std::vector<UpstreamStatus> RunService::View() {
  return FitCatalogLimits(ApplyApprovalPolicy(upstreams_->Snapshot(), *policy_));
}

uint64_t RunService::catalog_version() const { return upstreams_->catalog_version(); }

bool RunService::MayAsk() {
  const uint64_t version = upstreams_->catalog_version();
  {
    codemode::MutexLock lock(&may_ask_mu_);
    if (may_ask_version_ == version) return may_ask_;
  }
  bool asks = false;
  // As Run() sees them: a server that is down keeps its last known tools there.
  for (const UpstreamStatus& server : memory_.View(upstreams_->Snapshot())) {
    for (const UpstreamTool& tool : server.tools) {
      asks = asks || policy_->For(server.name, tool.name, tool.annotations) == Approval::kAsk;
    }
  }
  codemode::MutexLock lock(&may_ask_mu_);
  may_ask_version_ = version;
  may_ask_ = asks;
  return asks;
}

std::shared_ptr<const RunService::UpstreamsSeen> RunService::Seen() {
  const uint64_t version = upstreams_->catalog_version();
  const uint64_t generation = memory_.generation();
  {
    codemode::MutexLock lock(&catalog_mu_);
    if (seen_ && seen_->upstream_version == version && seen_->memory_generation == generation) return seen_;
  }
  auto seen = std::make_shared<UpstreamsSeen>();
  seen->upstream_version = version;
  seen->snapshot = upstreams_->Snapshot();
  seen->view = FitCatalogLimits(
      ApplyApprovalPolicy(memory_.View(seen->snapshot, &seen->memory_generation), *policy_));
  codemode::MutexLock lock(&catalog_mu_);
  seen_ = seen;
  return seen;
}

std::shared_ptr<const RunService::RunCatalog> RunService::CatalogFor(
    const std::shared_ptr<const UpstreamsSeen>& seen, const ServerAllowlist& servers) {
  {
    codemode::MutexLock lock(&catalog_mu_);
    if (catalog_ && catalog_->seen == seen && catalog_->servers == servers) return catalog_;
  }
  auto built = std::make_shared<RunCatalog>();
  built->seen = seen;
  built->servers = servers;
  built->catalog = BuildCatalog(seen->view, servers);
  built->key = CatalogKey(built->catalog);
  codemode::MutexLock lock(&catalog_mu_);
  catalog_ = built;
  return built;
}

absl::StatusOr<FinishedRun> RunService::Run(const RunRequest& request) {
  StageTimes::Mark(Stage::kRunStart);
  const absl::Time started = absl::Now();
  const LanguageSpec& language = *request.language;
  const std::shared_ptr<const UpstreamsSeen> seen = Seen();
  const std::vector<UpstreamStatus>& upstreams = seen->snapshot;
  RunLimits limits;
  limits.default_timeout_seconds = options_.default_timeout_seconds;
  limits.max_timeout_seconds = options_.max_timeout_seconds;
  limits.max_code_bytes = options_.max_code_bytes;
  absl::StatusOr<RunArguments> args = ParseRunArguments(request.arguments, upstreams, limits);
  if (args.ok() && args->session_named) {
    if (absl::Status name = CheckSessionName(language, args->session); !name.ok()) args = name;
  }
  if (!args.ok()) {
    Record(request, codemode::telemetry::TraceContext::ChildOf(request.trace_parent), CodeOf(request.arguments),
           "", RunOutcome::kRefused, absl::Now() - started, nullptr, args.status());
    return args.status();
  }
  if (!args->session_named) args->session = language.default_session;

  // What the code sees and may call: without the denied tools (sandboxd refuses calls
  // outside its catalog, and so does the router), and each call through the gate
  // (run_approvals.h).
  const std::vector<UpstreamStatus>& view = seen->view;
  // The gate judges calls by `view`, so the sandbox gets the catalog built from it, unless
  // it has that very one: a key by content, which a session keeps across the views that
  // give it (a server's memory, a version bump that changed nothing the catalog shows).
  std::shared_ptr<const RunCatalog> catalog = CatalogFor(seen, args->servers);
  StageTimes::Mark(Stage::kCatalogBuilt);
  RunProgress progress(request.progress);
  // Ends the run's execution: the client's cancel, or a call outside the catalog.
  auto end_run = std::make_shared<codemode::CancelToken>();
  if (request.cancel) {
    request.cancel->OnCancel([end_run, cancel = std::weak_ptr<codemode::CancelToken>(request.cancel)] {
      auto c = cancel.lock();
      end_run->Cancel(c ? c->reason() : "cancelled");
    });
  }
  // The run is a span of the client's trace (of a new one when it sent none).
  const codemode::telemetry::TraceContext trace = codemode::telemetry::TraceContext::ChildOf(request.trace_parent);
  RunSandbox sandbox;
  RunApprovals approvals(policy_.get(), options_.approval,
                         {&view, request.asker, &sandbox, request.credential, language.tool, trace.trace_id()});
  RouterOptions calls;
  calls.gate = [&approvals](const std::string& server, const std::string& tool, const json& arguments,
                            const std::shared_ptr<codemode::CancelToken>& cancel, std::string* approval) {
    return approvals.Check(server, tool, arguments, cancel, approval);
  };
  calls.metrics = options_.metrics.get();
  calls.trace = trace;
  calls.audit = options_.audit.get();
  calls.credential = request.credential;
  calls.audit_arguments = options_.audit_arguments;
  calls.sandbox = &sandbox;
  ToolCallRouter router(upstreams_, CallableTools::Of(catalog->catalog), end_run, &progress, std::move(calls));
  FinishedRun done;
  done.report.session = args->session;
  done.report.sandbox_in_text = !args->sandbox.empty() || !request.mcp_session;
  RunState run{&request, &language, *args, std::move(catalog),
          end_run, &router, &progress, &done.report, &sandbox, trace.Traceparent()};
  done.finished = Execute(run);
  // Whatever the run did to its sandbox's files (or the sandbox), listen streams of the
  // credential hear of it.
  watch_.Poke(request.credential);
  done.report.calls = router.stats();
  Record(request, trace, run.args.code, sandbox.id(), OutcomeOf(done.finished), absl::Now() - started,
         &done.report.calls, done.finished.status());
  StageTimes::Mark(Stage::kRunEnd);
  return done;
}

// The run's metrics, its log line and its audit line (with the trace id that joins it to
// its tool calls, sandboxd's log and the upstreams'). A run refused before anything ran
// (`calls` null) has no log line, and its audit line no duration nor failed calls.
void RunService::Record(const RunRequest& request, const codemode::telemetry::TraceContext& trace,
                        const std::string& code, const std::string& sandbox, RunOutcome outcome,
                        absl::Duration took, const ToolCallStats* calls, const absl::Status& why) {
  const char* tool = request.language->tool;
  const uint64_t total = calls ? calls->total : 0;
  if (options_.metrics) options_.metrics->RunFinished(tool, outcome, took, total);
  if (calls) {
    spdlog::info("{} {}: {} in {} ms, {} tool calls (trace {}, span {})", tool, sandbox.empty() ? "-" : sandbox,
                 GatewayMetrics::Name(outcome), absl::ToInt64Milliseconds(took), total, trace.trace_id(),
                 trace.span_id());
  }
  if (!options_.audit) return;
  json line = {{"kind", "run"},
               {"tool", tool},
               {"credential", request.credential},
               {"sandbox", sandbox},
               {"trace_id", trace.trace_id()},
               {"span_id", trace.span_id()},
               {"parent_span_id", request.trace_parent ? request.trace_parent->span_id() : ""},
               {"code_bytes", code.size()},
               {"code_sha256", AuditDigest(code)},
               {"outcome", GatewayMetrics::Name(outcome)},
               {"duration_ms", calls ? absl::ToInt64Milliseconds(took) : 0},
               {"tool_calls", total}};
  if (calls) line["tool_calls_failed"] = calls->failed;
  // A run refused (or failed) before its code finished says why: a catalog sandboxd
  // refused, say, leaves its reason here.
  if (!why.ok()) line["why"] = AuditText(why.message());
  options_.audit->Write(std::move(line));
}

absl::StatusOr<SandboxRef> RunService::OpenHandle(const std::string& handle,
                                                     const std::string& credential) {
  absl::StatusOr<SandboxAddress> address = handles_->Open(handle, credential);
  if (!address.ok()) return address.status();
  std::optional<size_t> endpoint = sandboxes_->FindEndpoint(address->endpoint);
  if (!endpoint) {
    // Sealed by us for this credential, so naming the endpoint tells nothing new.
    return absl::FailedPreconditionError(absl::StrCat(
        "this sandbox is on sandboxd ", address->endpoint.substr(0, 200),
        ", which this gateway is not configured with (--sandboxd)"));
  }
  return SandboxRef{*endpoint, address->session_id, address->runtime};
}

absl::StatusOr<Finished> RunService::Execute(RunState& run) {
  using BindingPtr = std::shared_ptr<SessionBindings::Binding>;
  const std::string& credential = run.request->credential;
  Placement placement;
  const std::optional<std::string>& mcp_session = run.request->mcp_session;
  if (run.args.sandbox.empty() && !mcp_session) {
    // A stateless request: a new sandbox, which the result's handle names. It belongs to no
    // MCP session; sandboxd's per-owner cap and idle expiry bound it.
    if (run.args.session_named) {
      return absl::InvalidArgumentError(
          "'session' names a sandbox of an MCP session, and this request has none (protocol "
          "2026-07-28): pass the `sandbox` handle of an earlier result instead");
    }
    run.report->session = "";
    placement.find = [&](int) -> absl::StatusOr<BindingPtr> {
      return bindings_.NewStateless(credential, run.language->runtime);
    };
    placement.forget = [&](const BindingPtr& b) { bindings_.ForgetAdopted(b); };
    placement.opened = [&](const BindingPtr& b) { bindings_.Remember(b); };
    return ExecuteIn(run, placement);
  }
  if (run.args.sandbox.empty()) {
    placement.find = [&](int) {
      return bindings_.FindOrRegister(*mcp_session, run.args.session, credential, run.language->runtime);
    };
    placement.forget = [&](const BindingPtr& b) { bindings_.Forget(*mcp_session, run.args.session, b); };
    placement.opened = [](const BindingPtr&) {};
    return ExecuteIn(run, placement);
  }
  absl::StatusOr<SandboxRef> ref = OpenHandle(run.args.sandbox, credential);
  if (!ref.ok()) return ref.status();
  if (ref->runtime != run.language->runtime) {
    // Never Python code in a Node session nor the other way round; the handle is the
    // caller's own, so naming its language tells nothing new.
    return absl::FailedPreconditionError(absl::StrCat(
        "this sandbox handle names a ", ref->runtime, " sandbox: pass it to run_", ref->runtime,
        ", or leave out `sandbox` to run in a ", run.language->runtime, " sandbox; nothing ran"));
  }
  run.report->session = "";
  // A gone sandbox is replaced by a new one that belongs to the caller's MCP session, under
  // a name of its own: its caps (--max_sandboxes_per_credential, the named sessions) and
  // its end apply, so a stale handle cannot mint sandboxes past them. Only a stateless
  // request, which has no MCP session, gets a sandbox of none, which sandboxd's per-owner
  // cap and idle expiry bound.
  std::string fresh_name;
  placement.by_handle = true;
  placement.find = [&](int attempt) -> absl::StatusOr<BindingPtr> {
    if (attempt == 0) return bindings_.Adopt(*ref, credential);
    if (!mcp_session) return bindings_.NewStateless(credential, run.language->runtime);
    // A name of its own, never one the client uses: the client's names stay its own.
    auto fresh = bindings_.RegisterFresh(*mcp_session, "sandbox-", credential, run.language->runtime);
    if (!fresh.ok()) return fresh.status();
    fresh_name = fresh->first;
    return fresh->second;
  };
  placement.forget = [&](const BindingPtr& b) {
    if (fresh_name.empty()) {
      bindings_.ForgetAdopted(b);
    } else {
      bindings_.Forget(*mcp_session, fresh_name, b);
    }
  };
  placement.opened = [&](const BindingPtr& b) {
    if (fresh_name.empty()) bindings_.Remember(b);
  };
  return ExecuteIn(run, placement);
}

absl::StatusOr<Finished> RunService::ExecuteIn(RunState& run, const Placement& placement) {
  for (int attempt = 0;; ++attempt) {
    // The handle of a sandbox that is gone is no answer, also when no new one can be had.
    if (attempt > 0) run.report->sandbox.clear();
    absl::StatusOr<std::shared_ptr<SessionBindings::Binding>> binding = placement.find(attempt);
    if (!binding.ok()) return binding.status();
    absl::StatusOr<Finished> finished;
    bool session_gone = false;
    // Runs of one binding queue here; a queued run whose caller cancels it (or goes away)
    // leaves the queue at once instead of holding its thread until the run ahead ends.
    if (!(*binding)->LockRun(run.request->cancel)) {
      return absl::CancelledError(absl::StrCat(
          "the run was cancelled (", run.request->cancel->reason(),
          ") while it waited for the previous run of this session; nothing ran"));
    }
    // The run ahead lost the session while this one waited: say why, and start over on a
    // new binding (once: the old one is forgotten here if the run ahead has not yet).
    if (std::string why = (*binding)->lost_reason(); !why.empty() && attempt == 0) {
      (*binding)->UnlockRun();
      placement.forget(*binding);
      run.report->notes.push_back(absl::StrCat(
          "the sandbox session was lost while this run waited (", why,
          "); this ran in a new session, so earlier variables are gone"));
      run.report->session_reset = true;
      continue;
    }
    const bool was_ready = (*binding)->ready();
    finished = ExecuteOn(**binding, run, attempt == 0, session_gone);
    // Its session lives on a sandboxd that does not answer: whether it comes back is not
    // known here, so the caller is told both ways on.
    if (was_ready && absl::IsUnavailable(finished.status())) {
      finished = absl::UnavailableError(absl::StrCat(
          finished.status().message(), "; this sandbox's variables and files are there: run "
          "again once it is back, or ", placement.by_handle ? "run without `sandbox`" : "give a new `session` name",
          " to start over in a new sandbox, placed on a sandboxd that answers"));
    }
    if (!was_ready && (*binding)->ready()) placement.opened(*binding);
    if (finished.ok() && finished->status() == Finished::SESSION_LOST) {
      const std::string& why = finished->error().message();  // set before the next run's turn
      (*binding)->set_lost_reason(why.empty() ? "sandboxd reported it lost" : why);
    }
    const bool lost = !(*binding)->lost_reason().empty();
    (*binding)->UnlockRun();
    if (lost) {
      placement.forget(*binding);
      if (finished.ok()) {
        run.report->notes.push_back("the sandbox session was lost; the next run starts in a new session");
      }
    }
    if (!session_gone || attempt > 0) return finished;
    // sandboxd's reason names the session id, which a handle keeps from the client: only
    // whether a full daemon gave it to another owner is passed on.
    const bool reclaimed = absl::StrContains(finished.status().message(), kReclaimedForAnotherOwner);
    run.report->notes.push_back(
        !placement.by_handle
            ? absl::StrCat("the previous sandbox session was lost (", finished.status().message(),
                           "); this ran in a new session, so earlier variables are gone")
        : reclaimed
            ? std::string("the sandbox this handle names was reclaimed for another owner: sandboxd "
                          "was full, and this credential held more sandboxes than that owner; this "
                          "ran in a new sandbox, so earlier variables are gone")
            : std::string("the sandbox this handle names is gone (it ended, expired or was lost); "
                          "this ran in a new sandbox, so earlier variables are gone"));
    run.report->session_reset = true;
    placement.forget(*binding);
  }
}

absl::StatusOr<Finished> RunService::ExecuteOn(SessionBindings::Binding& binding, RunState& run,
                                                bool first_attempt, bool& session_gone) {
  // The replacement of a handle's gone sandbox may not end another sandbox of the
  // credential for its room (handles kept past the limit would end each other in turn):
  // the caller decides, by running without `sandbox`.
  const bool replacement = !run.args.sandbox.empty() && !first_attempt;
  absl::Status opened = bindings_.Open(binding, run.request->mcp_session.value_or(""),
                                       run.args.sandbox.empty() ? run.args.session : "sandbox",
                                       run.catalog->catalog, run.catalog->key, /*reclaim_idle=*/!replacement);
  if (replacement && absl::IsResourceExhausted(opened)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the sandbox this handle names is gone, and a new one would end another of this "
        "credential's sandboxes (", opened.message(), "); nothing ran. Run without `sandbox` to "
        "start a new sandbox: the least recently used idle one of yours then makes room"));
  }
  if (!opened.ok()) return opened;
  const SandboxRef ref = binding.ref();
  run.report->sandbox = handles_->Seal({sandboxes_->EndpointName(ref.endpoint), ref.session_id, ref.runtime},
                                       run.request->credential);
  if (run.args.reset && first_attempt) {
    absl::Status s = sandboxes_->ResetSession(binding.ref());
    if (!s.ok() && !SessionGone(s)) return s;
  }
  for (const RunFile& file : run.args.files) {
    absl::Status s = sandboxes_->UploadFile(binding.ref(), file.path, file.data, run.request->cancel);
    if (s.ok()) continue;
    session_gone = SessionGone(s);
    if (session_gone) return s;
    return absl::Status(s.code(), absl::StrCat("files['", file.path.substr(0, 64), "']: ", s.message()));
  }
  run.sandbox->Enter(binding.ref().session_id, binding.approved);
  const bool send_catalog = binding.catalog_key != run.catalog->key;
  // Until sandboxd has answered, which catalog it holds is not known: the next run sends
  // its own if this one fails.
  if (send_catalog) binding.catalog_key.clear();
  auto calls_token = std::make_shared<codemode::CancelToken>();
  run.end->OnCancel([calls_token] { calls_token->Cancel("the run was cancelled"); });
  ExecuteHandlers handlers;
  handlers.on_output = [&run](bool, const std::string& text) { run.progress->Report(text); };
  handlers.on_tool_call = [&run, calls_token](const sandbox::v1::ToolCall& call,
                                              const AnswerCharges& answer) {
    return run.router->Route(call, calls_token, answer);
  };
  handlers.on_tool_call_refused = [&run](const sandbox::v1::ToolCall& call, const std::string&) {
    run.router->Refused(call);
  };
  handlers.on_stream_end = [calls_token] { calls_token->Cancel("the execution finished"); };
  handlers.credential = run.request->credential;
  handlers.traceparent = run.traceparent;
  handlers.runtime = run.language->runtime;
  StageTimes::Mark(Stage::kExecuteStart);
  absl::StatusOr<Finished> finished = sandboxes_->Execute(
      binding.ref(), run.args.code, static_cast<uint32_t>(run.args.timeout_seconds * 1000),
      send_catalog ? &run.catalog->catalog : nullptr, handlers, run.end);
  StageTimes::Mark(Stage::kExecuteEnd);
  if (std::string why = run.router->violation(); !why.empty()) {
    // The session is never used again: what answers for it does not behave as sandboxd.
    binding.set_lost_reason(why);
    return absl::InternalError(absl::StrCat(
        why, " (sandboxd at ", sandboxes_->EndpointName(binding.ref().endpoint),
        "): the run was ended and its session dropped. sandboxd refuses such calls itself, so "
        "whatever answers at that address is not behaving as sandboxd"));
  }
  // Only a cancel that sandboxd did not act on within --sandbox_cancel_grace cancels the
  // call itself: that code does not stop when asked (sandboxd kills it after its
  // --kill_grace). Its session is dropped now (deleted in sandboxd), so that the next run
  // does not queue behind it there only to hear that the session was lost.
  if (absl::IsCancelled(finished.status()) && run.request->cancel && run.request->cancel->cancelled()) {
    binding.set_lost_reason(absl::StrCat(finished.status().message(), "; its session was deleted"));
  }
  if (finished.ok() && send_catalog) binding.catalog_key = run.catalog->key;
  // A stdout kept in out/ came after the runner's fingerprint of out/: the walk finds it.
  const bool spilled = finished.ok() && SpillStdout(binding.ref(), run, *finished);
  if (finished.ok() && finished->status() != Finished::SESSION_LOST) {
    ReportProducedFiles(binding, run, spilled ? "" : finished->out_digest());
  }
  session_gone = !finished.ok() && SessionGone(finished.status());
  return finished;
}

bool RunService::SpillStdout(const SandboxRef& ref, RunState& run, Finished& f) {
  const size_t limit = options_.spill_stdout_bytes;
  if (limit == 0 || f.stdout().size() <= limit || f.status() == Finished::SESSION_LOST) return false;
  const std::string path = absl::StrCat("out/", run.language->tool, "/stdout-", f.execution_id(), ".txt");
  absl::Status s = sandboxes_->UploadFile(ref, path, f.stdout(), run.request->cancel);
  if (!s.ok()) {
    run.report->notes.push_back(absl::StrCat("the whole stdout could not be kept in the workspace: ",
                                             s.message()));
    return true;
  }
  run.report->notes.push_back(absl::StrCat(
      "stdout was ", f.stdout().size(), " bytes; all of it is in /workspace/", path,
      ": read or search it from code instead of printing it"));
  run.report->stdout_file = "/workspace/" + path;
  f.set_stdout(Clip(f.stdout(), limit));
  return true;
}

void RunService::ReportProducedFiles(SessionBindings::Binding& binding, RunState& run,
                                     const std::string& out_digest) {
  StageTimes::Mark(Stage::kListStart);
  absl::StatusOr<OutListing> changed = resources_.Refresh(binding, run.request->cancel, out_digest);
  StageTimes::Mark(Stage::kListEnd);
  if (!changed.ok()) {
    // The code ran and its files stay in the sandbox; only the listing failed, most often
    // because sandboxd was restarting right after the run (a call that outlives a
    // restart). The listing is relative to the last one that worked, so the next run of
    // this sandbox lists them.
    run.report->notes.push_back(absl::StrCat(
        "the code ran, but the files under /workspace/out/ were not listed",
        absl::IsUnavailable(changed.status()) ? " (sandboxd was unavailable right after the run: restarting?)" : "",
        "; they stay in the sandbox and the next run lists what changed: ", changed.status().message()));
    return;
  }
  if (changed->truncated) {
    const OutLimits& l = options_.resources.limits;
    run.report->notes.push_back(absl::StrCat(
        "/workspace/out/ is larger than the gateway follows (", l.max_files, " files, ",
        l.max_directories, " directories, ", l.max_depth, " levels, paths up to ",
        l.max_path_bytes, " bytes, ", l.max_bytes, " bytes of paths): some files are not listed"));
  }
  if (changed->files.empty()) return;
  run.report->files = std::move(changed->files);
  if (run.request->files_changed) run.request->files_changed();
}

}  // namespace gateway
