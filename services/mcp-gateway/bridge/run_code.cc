// The run_python tool: one run from the MCP call down to the sandbox and back. See
// run_code.h.
#include "bridge/run_code.h"

#include <openssl/rand.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bridge/client_asker.h"
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

// RunCodeOptions::handles, or a sealer with a random key of this process.
std::shared_ptr<const HandleSealer> SealerOrOwn(std::shared_ptr<const HandleSealer> given) {
  if (given) return given;
  HandleSealer::Key key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    throw std::runtime_error("cannot read random bytes for the sandbox handle key");
  }
  return std::make_shared<HandleSealer>(std::vector<HandleSealer::Key>{key}, absl::Hours(24));
}

PendingRunsOptions PendingOptions(const RunCodeOptions& options) {
  PendingRunsOptions pending = options.pending;
  pending.keep = std::max(pending.keep, options.approval.timeout);
  return pending;
}

// The approval gate counts into the run's metrics.
RunCodeOptions WithMetricsWired(RunCodeOptions options) {
  options.approval.metrics = options.metrics.get();
  return options;
}

}  // namespace

RunCodeTool::RunCodeTool(Sandboxes* sandboxes, Upstreams* upstreams, RunCodeOptions options)
    : sandboxes_(sandboxes),
      upstreams_(upstreams),
      options_(WithMetricsWired(options)),
      handles_(SealerOrOwn(options.handles)),
      policy_(options.approvals ? options.approvals : std::make_shared<const ApprovalPolicy>()),
      bindings_(sandboxes, options.max_named_sessions, options.max_sandboxes_per_credential,
                options.cap_credentials_in_sandboxd),
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
             options.resources_poll_interval, options.resources_look_timeout),
      pending_(handles_.get(), PendingOptions(options)) {}

RunCodeTool::~RunCodeTool() = default;

json RunCodeTool::ListTools() {
  const std::vector<UpstreamStatus> view =
      FitCatalogLimits(ApplyApprovalPolicy(upstreams_->Snapshot(), *policy_));
  json tools = json::array();
  for (RunLanguage l : options_.languages) {
    const LanguageSpec& language = Spec(l);
    json schema = RunArgumentsSchema(options_.max_timeout_seconds);
    schema["properties"]["code"]["description"] = language.code_description;
    tools.push_back(
        {{"name", language.tool},
         {"title", language.title},
         {"description", language.describe(view, options_.max_description_bytes)},
         {"inputSchema", std::move(schema)},
         {"outputSchema", RunResultSchema()},
         {"annotations", {{"readOnlyHint", false}, {"destructiveHint", true}, {"openWorldHint", true}}}});
  }
  return tools;
}

const LanguageSpec* RunCodeTool::Offered(const std::string& tool) const {
  std::optional<RunLanguage> language = LanguageOfTool(tool);
  if (!language || std::find(options_.languages.begin(), options_.languages.end(), *language) ==
                       options_.languages.end()) {
    return nullptr;
  }
  return &Spec(*language);
}

absl::StatusOr<json> RunCodeTool::CallTool(const std::string& name, const json& arguments,
                                             ToolCallContext& ctx) {
  const LanguageSpec* language = Offered(name);
  if (language == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown tool '", name, "'"));
  // Protocol 2026-07-28: a run that may ask for an approval goes on a thread of its own, so
  // that it can outlive this request while it waits, and the client's retry picks it up
  // (pending_runs.h).
  if (ctx.input_required && !ctx.request_state.empty()) return pending_.Resume(name, arguments, ctx);
  if (!ctx.input_required || !MayAsk()) return CallToolNow(*language, arguments, ctx);
  return pending_.Start(
      [this, language, arguments](ToolCallContext& own) { return CallToolNow(*language, arguments, own); },
      name, arguments, ctx);
}

bool RunCodeTool::MayAsk() {
  const uint64_t version = upstreams_->catalog_version();
  {
    codemode::MutexLock lock(&may_ask_mu_);
    if (may_ask_version_ == version) return may_ask_;
  }
  bool asks = false;
  for (const UpstreamStatus& server : upstreams_->Snapshot()) {
    for (const UpstreamTool& tool : server.tools) {
      asks = asks || policy_->For(server.name, tool.name, tool.annotations) == Approval::kAsk;
    }
  }
  codemode::MutexLock lock(&may_ask_mu_);
  may_ask_version_ = version;
  may_ask_ = asks;
  return asks;
}

namespace {

// The audit line of a run refused before anything ran: what little is known of it.
json RefusedRunLine(const ToolCallContext& ctx, const char* tool, const json& arguments,
                    const absl::Status& why) {
  const auto code = arguments.is_object() ? arguments.find("code") : arguments.end();
  const std::string text = code != arguments.end() && code->is_string() ? code->get<std::string>() : "";
  const codemode::telemetry::TraceContext trace = codemode::telemetry::TraceContext::ChildOf(ctx.trace_parent);
  return {{"kind", "run"},          {"tool", tool},
          {"credential", ctx.credential},
          {"sandbox", ""},          {"trace_id", trace.trace_id()},
          {"span_id", trace.span_id()},
          {"parent_span_id", ctx.trace_parent ? ctx.trace_parent->span_id() : ""},
          {"code_bytes", text.size()}, {"code_sha256", AuditDigest(text)},
          {"outcome", "refused"},   {"why", AuditText(why.message())},
          {"duration_ms", 0},       {"tool_calls", 0}};
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

}  // namespace

absl::StatusOr<json> RunCodeTool::CallToolNow(const LanguageSpec& language, const json& arguments,
                                                ToolCallContext& ctx) {
  const absl::Time started = absl::Now();
  GatewayMetrics* metrics = options_.metrics.get();
  const std::vector<UpstreamStatus> upstreams = upstreams_->Snapshot();
  RunLimits limits;
  limits.default_timeout_seconds = options_.default_timeout_seconds;
  limits.max_timeout_seconds = options_.max_timeout_seconds;
  limits.max_code_bytes = options_.max_code_bytes;
  absl::StatusOr<RunArguments> args = ParseRunArguments(arguments, upstreams, limits);
  if (args.ok() && args->session_named) {
    if (absl::Status name = CheckSessionName(language, args->session); !name.ok()) args = name;
  }
  if (!args.ok()) {
    if (metrics) metrics->RunFinished(language.tool, RunOutcome::kRefused, absl::Now() - started, 0);
    if (options_.audit) options_.audit->Write(RefusedRunLine(ctx, language.tool, arguments, args.status()));
    return args.status();
  }
  if (!args->session_named) args->session = language.default_session;

  // What the code sees and may call: without the denied tools (sandboxd refuses calls
  // outside its catalog, and so does the router), and each call through the gate
  // (run_approvals.h).
  const std::vector<UpstreamStatus> view =
      FitCatalogLimits(ApplyApprovalPolicy(memory_.View(upstreams), *policy_));
  // The gate judges calls by `view`, so the sandbox gets the catalog built from it, unless
  // it has that very one: a key by content, not by the upstreams' catalog version, which is
  // read apart from the snapshot and which the view (memory_) does not follow.
  sandbox::v1::Catalog catalog = BuildCatalog(view, args->servers);
  std::string catalog_key = CatalogKey(catalog);
  RunProgress progress(ctx.progress);
  // Ends the run's execution: the client's cancel, or a call outside the catalog.
  auto end_run = std::make_shared<codemode::CancelToken>();
  if (ctx.cancel) ctx.cancel->OnCancel([end_run, cancel = std::weak_ptr<codemode::CancelToken>(ctx.cancel)] {
    auto c = cancel.lock();
    end_run->Cancel(c ? c->reason() : "cancelled");
  });
  // The run is a span of the client's trace (of a new one when it sent none).
  const codemode::telemetry::TraceContext trace = codemode::telemetry::TraceContext::ChildOf(ctx.trace_parent);
  RunSandbox sandbox;
  ClientAsker asker(&ctx);
  RunApprovals approvals(policy_.get(), options_.approval,
                         {&view, &asker, &sandbox, ctx.credential, language.tool, trace.trace_id()});
  RouterOptions calls;
  calls.gate = [&approvals](const std::string& server, const std::string& tool, const json& arguments,
                            const std::shared_ptr<codemode::CancelToken>& cancel, std::string* approval) {
    return approvals.Check(server, tool, arguments, cancel, approval);
  };
  calls.metrics = metrics;
  calls.trace = trace;
  calls.audit = options_.audit.get();
  calls.credential = ctx.credential;
  calls.audit_arguments = options_.audit_arguments;
  calls.sandbox = &sandbox;
  ToolCallRouter router(upstreams_, CallableTools::Of(catalog), end_run, &progress, std::move(calls));
  RunReport report;
  report.session = args->session;
  report.sandbox_in_text = !args->sandbox.empty() || ctx.session_key.empty();
  // resource_link blocks came with protocol 2025-06-18; older clients get the links as text.
  report.resource_links = ctx.protocol_version >= "2025-06-18";
  Run run{&language, *args, std::move(catalog), std::move(catalog_key),
          &ctx, end_run, &router, &progress, &report, &sandbox, trace.Traceparent()};
  absl::StatusOr<Finished> finished = Execute(run);
  // Whatever the run did to its sandbox's files (or the sandbox), listen streams of the
  // credential hear of it.
  watch_.Poke(ctx.credential);
  report.calls = router.stats();
  Record(run, trace, OutcomeOf(finished), absl::Now() - started, finished.status());
  if (!finished.ok()) {
    return FormatRunError(std::string(finished.status().message()), report);
  }
  return FormatRunResult(*finished, report, options_.max_text_bytes);
}

// The run's metrics, its audit line and its log line (with the trace id that joins it to
// its tool calls, sandboxd's log and the upstreams').
void RunCodeTool::Record(const Run& run, const codemode::telemetry::TraceContext& trace,
                           RunOutcome outcome, absl::Duration took, const absl::Status& why) {
  const uint64_t calls = run.report->calls.total;
  if (options_.metrics) options_.metrics->RunFinished(run.language->tool, outcome, took, calls);
  const std::string sandbox = run.sandbox->id();
  spdlog::info("{} {}: {} in {} ms, {} tool calls (trace {}, span {})", run.language->tool,
               sandbox.empty() ? "-" : sandbox,
               GatewayMetrics::Name(outcome), absl::ToInt64Milliseconds(took), calls,
               trace.trace_id(), trace.span_id());
  if (!options_.audit) return;
  json line = {{"kind", "run"},
               {"tool", run.language->tool},
               {"credential", run.ctx->credential},
               {"sandbox", sandbox},
               {"trace_id", trace.trace_id()},
               {"span_id", trace.span_id()},
               {"parent_span_id", run.ctx->trace_parent ? run.ctx->trace_parent->span_id() : ""},
               {"code_bytes", run.args.code.size()},
               {"code_sha256", AuditDigest(run.args.code)},
               {"outcome", GatewayMetrics::Name(outcome)},
               {"duration_ms", absl::ToInt64Milliseconds(took)},
               {"tool_calls", calls},
               {"tool_calls_failed", run.report->calls.failed}};
  // A run refused (or failed) before its code finished says why (attack round 20, A3: a
  // catalog sandboxd refused left no reason in the line).
  if (!why.ok()) line["why"] = AuditText(why.message());
  options_.audit->Write(std::move(line));
}

absl::StatusOr<SandboxRef> RunCodeTool::OpenHandle(const std::string& handle,
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

absl::StatusOr<Finished> RunCodeTool::Execute(Run& run) {
  using BindingPtr = std::shared_ptr<SessionBindings::Binding>;
  const std::string& credential = run.ctx->credential;
  Placement placement;
  if (run.args.sandbox.empty() && run.ctx->session_key.empty()) {
    // No MCP session (protocol 2026-07-28): a new sandbox, which the result's handle names.
    // It belongs to no MCP session; sandboxd's per-owner cap and idle expiry bound it.
    if (run.args.session_named) {
      return absl::InvalidArgumentError(
          "'session' names a sandbox of an MCP session, and this request has none (protocol "
          "2026-07-28): pass the `sandbox` handle of an earlier result instead");
    }
    run.report->session = "";
    placement.find = [&](int) -> absl::StatusOr<BindingPtr> {
      return bindings_.NewDetached(credential, run.language->runtime);
    };
    placement.forget = [&](const BindingPtr& b) { bindings_.ForgetAdopted(b); };
    placement.opened = [&](const BindingPtr& b) { bindings_.Remember(b); };
    return ExecuteIn(run, placement);
  }
  if (run.args.sandbox.empty()) {
    const std::string& mcp_session = run.ctx->session_key;
    placement.find = [&](int) {
      return bindings_.FindOrRegister(mcp_session, run.args.session, credential, run.language->runtime);
    };
    placement.forget = [&](const BindingPtr& b) { bindings_.Forget(mcp_session, run.args.session, b); };
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
  // its end apply, so a stale handle cannot mint sandboxes past them (attack round 13, F1).
  // Only a caller without an MCP session gets a detached sandbox, which sandboxd's
  // per-owner cap and idle expiry bound.
  const std::string& mcp_session = run.ctx->session_key;
  std::string fresh_name;
  placement.by_handle = true;
  placement.find = [&](int attempt) -> absl::StatusOr<BindingPtr> {
    if (attempt == 0) return bindings_.Adopt(*ref, credential);
    if (mcp_session.empty()) return bindings_.NewDetached(credential, run.language->runtime);
    // A name of its own, never one the client uses (round 13's re-check, N1).
    auto fresh = bindings_.RegisterFresh(mcp_session, "sandbox-", credential, run.language->runtime);
    if (!fresh.ok()) return fresh.status();
    fresh_name = fresh->first;
    return fresh->second;
  };
  placement.forget = [&](const BindingPtr& b) {
    if (fresh_name.empty()) {
      bindings_.ForgetAdopted(b);
    } else {
      bindings_.Forget(mcp_session, fresh_name, b);
    }
  };
  placement.opened = [&](const BindingPtr& b) {
    if (fresh_name.empty()) bindings_.Remember(b);
  };
  return ExecuteIn(run, placement);
}

absl::StatusOr<Finished> RunCodeTool::ExecuteIn(Run& run, const Placement& placement) {
  for (int attempt = 0;; ++attempt) {
    // The handle of a sandbox that is gone is no answer, also when no new one can be had
    // (round 13's re-check, N3).
    if (attempt > 0) run.report->sandbox.clear();
    absl::StatusOr<std::shared_ptr<SessionBindings::Binding>> binding = placement.find(attempt);
    if (!binding.ok()) return binding.status();
    absl::StatusOr<Finished> finished;
    bool session_gone = false;
    // Runs of one binding queue here; a queued run whose caller cancels it (or goes away)
    // leaves the queue at once instead of holding its thread until the run ahead ends.
    if (!(*binding)->LockRun(run.ctx->cancel)) {
      return absl::CancelledError(absl::StrCat(
          "the run was cancelled (", run.ctx->cancel->reason(),
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
    // sandboxd's reason names the session id, which a handle keeps from the client (F4):
    // only whether a full daemon gave it to another owner is passed on.
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

absl::StatusOr<Finished> RunCodeTool::ExecuteOn(SessionBindings::Binding& binding, Run& run,
                                                  bool first_attempt, bool& session_gone) {
  // The replacement of a handle's gone sandbox may not end another sandbox of the
  // credential for its room (attack round 14, F4: handles kept past the limit ended each
  // other in turn): the caller decides, by running without `sandbox`.
  const bool replacement = !run.args.sandbox.empty() && !first_attempt;
  absl::Status opened = bindings_.Open(binding, run.ctx->session_key,
                                       run.args.sandbox.empty() ? run.args.session : "sandbox",
                                       run.catalog, run.catalog_key, /*reclaim_idle=*/!replacement);
  if (replacement && absl::IsResourceExhausted(opened)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the sandbox this handle names is gone, and a new one would end another of this "
        "credential's sandboxes (", opened.message(), "); nothing ran. Run without `sandbox` to "
        "start a new sandbox: the least recently used idle one of yours then makes room"));
  }
  if (!opened.ok()) return opened;
  const SandboxRef ref = binding.ref();
  run.report->sandbox = handles_->Seal({sandboxes_->EndpointName(ref.endpoint), ref.session_id, ref.runtime},
                                       run.ctx->credential);
  if (run.args.reset && first_attempt) {
    absl::Status s = sandboxes_->ResetSession(binding.ref());
    if (!s.ok() && !SessionGone(s)) return s;
  }
  for (const RunFile& file : run.args.files) {
    absl::Status s = sandboxes_->UploadFile(binding.ref(), file.path, file.data, run.ctx->cancel);
    if (s.ok()) continue;
    session_gone = SessionGone(s);
    if (session_gone) return s;
    return absl::Status(s.code(), absl::StrCat("files['", file.path.substr(0, 64), "']: ", s.message()));
  }
  run.sandbox->Enter(binding.ref().session_id, binding.approved);
  const bool send_catalog = binding.catalog_key != run.catalog_key;
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
  handlers.credential = run.ctx->credential;
  handlers.traceparent = run.traceparent;
  handlers.runtime = run.language->runtime;
  absl::StatusOr<Finished> finished = sandboxes_->Execute(
      binding.ref(), run.args.code, static_cast<uint32_t>(run.args.timeout_seconds * 1000),
      send_catalog ? &run.catalog : nullptr, handlers, run.end);
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
  if (absl::IsCancelled(finished.status()) && run.ctx->cancel && run.ctx->cancel->cancelled()) {
    binding.set_lost_reason(absl::StrCat(finished.status().message(), "; its session was deleted"));
  }
  if (finished.ok() && send_catalog) binding.catalog_key = run.catalog_key;
  if (finished.ok()) SpillStdout(binding.ref(), run, *finished);
  if (finished.ok() && finished->status() != Finished::SESSION_LOST) ReportProducedFiles(binding, run);
  session_gone = !finished.ok() && SessionGone(finished.status());
  return finished;
}

void RunCodeTool::SpillStdout(const SandboxRef& ref, Run& run, Finished& f) {
  const size_t limit = options_.spill_stdout_bytes;
  if (limit == 0 || f.stdout().size() <= limit || f.status() == Finished::SESSION_LOST) return;
  const std::string path = absl::StrCat("out/", run.language->tool, "/stdout-", f.execution_id(), ".txt");
  absl::Status s = sandboxes_->UploadFile(ref, path, f.stdout(), run.ctx->cancel);
  if (!s.ok()) {
    run.report->notes.push_back(absl::StrCat("the whole stdout could not be kept in the workspace: ",
                                             s.message()));
    return;
  }
  run.report->notes.push_back(absl::StrCat(
      "stdout was ", f.stdout().size(), " bytes; all of it is in /workspace/", path,
      ": read or search it from code instead of printing it"));
  run.report->stdout_file = "/workspace/" + path;
  f.set_stdout(Clip(f.stdout(), limit));
}

void RunCodeTool::ReportProducedFiles(SessionBindings::Binding& binding, Run& run) {
  absl::StatusOr<OutListing> changed = resources_.Refresh(binding, run.ctx->cancel);
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
  if (run.ctx->resources_changed) run.ctx->resources_changed();
}

absl::StatusOr<json> RunCodeTool::ListResources(const std::string& session_key,
                                                  const std::string& cursor) {
  return resources_.List(session_key, cursor);
}

absl::StatusOr<json> RunCodeTool::ListResourceTemplates(const std::string& session_key) {
  return resources_.Templates(session_key);
}

absl::StatusOr<json> RunCodeTool::ReadResource(const std::string& uri, ToolCallContext& context) {
  return resources_.Read(context.session_key, context.credential, uri, context.cancel, context.budget);
}

absl::StatusOr<json> RunCodeTool::ListOwnedResources(const std::string& cursor,
                                                       ToolCallContext& context) {
  return owned_.List(context.credential, cursor, context.cancel);
}

std::shared_ptr<void> RunCodeTool::WatchResources(const std::string& credential,
                                                    std::function<void()> ready,
                                                    std::function<void()> changed) {
  return watch_.Subscribe(credential, std::move(ready), std::move(changed));
}

void RunCodeTool::SessionClosed(const std::string& session_key) { bindings_.Close(session_key); }

void RunCodeTool::CloseAll() { bindings_.CloseAll(); }

}  // namespace gateway
