// McpSession's calls that run on a worker: tools/call, resources/read and (2026-07-28)
// resources/list start here (StartWork: counted against the call limits, a thread of the
// session's workers each) and RunWork gives the provider its ToolCallContext: progress,
// cancellation, the credential's byte budget and the way to ask the client. See
// mcp_session.cc.
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/untrusted_json.h"
#include "server/mcp_session_impl.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// A requestState longer than this is none of ours (HandleSealer::SealState's are ~150 bytes).
constexpr size_t kMaxRequestStateBytes = 4096;

// State behind ToolCallContext::progress: enforces increasing values and stops
// notifications once the response has been produced.
struct ProgressState {
  codemode::Mutex mu;
  std::optional<double> last;
  bool done = false;
};

// The progressToken of a request, or null when there is none (or it has a type MCP does
// not allow, in which case we simply do not report progress).
json ProgressToken(const json& params) {
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return nullptr;
  auto token = meta->find("progressToken");
  if (token == meta->end() || !wire::IsValidId(*token)) return nullptr;
  return *token;
}

}  // namespace

json UsableCapabilities(const json& declared) {
  json kept = json::object();
  if (!declared.is_object()) return kept;
  for (const char* name : {"elicitation", "sampling", "roots"}) {
    auto it = declared.find(name);
    if (it == declared.end() || !it->is_object()) continue;
    kept[name] = codemode::ApproxJsonBytes(*it) <= 4096 ? *it : json::object();
  }
  return kept;
}

json McpSession::Impl::StartToolCall(const json& id, const json& params,
                                     const std::shared_ptr<ReplySink>& reply, bool stateless) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return MakeError(id, kInvalidParams, "params.name must be a string");
  }
  json arguments = json::object();
  auto args = params.find("arguments");
  if (args != params.end() && !args->is_null()) {
    if (!args->is_object())
      return MakeError(id, kInvalidParams, "params.arguments must be an object");
    arguments = *args;
  }
  std::string tool = name->get<std::string>();
  WorkSpec spec;
  spec.bytes = codemode::ApproxJsonBytes(arguments);
  spec.what = "tool " + tool;
  spec.work = [this, tool, arguments = std::move(arguments)](ToolCallContext& context) {
    return provider->CallTool(tool, arguments, context);
  };
  if (stateless) {
    spec.stateless_method = "tools/call";
    // The retry of a multi round-trip request (ToolCallContext::input_required).
    auto state = params.find("requestState");
    if (state != params.end() && !state->is_null()) {
      if (!state->is_string() || state->get_ref<const std::string&>().size() > kMaxRequestStateBytes) {
        return MakeError(id, kInvalidParams, "params.requestState must be the string of an input_required result");
      }
      spec.request_state = state->get<std::string>();
    }
    auto responses = params.find("inputResponses");
    if (responses != params.end() && !responses->is_null()) {
      if (!responses->is_object()) return MakeError(id, kInvalidParams, "params.inputResponses must be an object");
      spec.input_responses = *responses;
      spec.bytes += codemode::ApproxJsonBytes(*responses);
    }
  }
  return StartWork(id, params, reply, std::move(spec));
}

json McpSession::Impl::StartRead(const json& id, const json& params,
                                 const std::shared_ptr<ReplySink>& reply, bool stateless) {
  auto uri = params.find("uri");
  if (uri == params.end() || !uri->is_string()) {
    return MakeError(id, kInvalidParams, "params.uri must be a string");
  }
  WorkSpec spec;
  spec.what = "resources/read";
  spec.work = [this, uri = uri->get<std::string>()](ToolCallContext& context) {
    return provider->resources()->ReadResource(uri, context);
  };
  spec.read = true;
  spec.bytes = codemode::ApproxJsonBytes(*uri);
  if (stateless) {  // SEP-2164: -32602 with the uri
    spec.not_found_data = {{"uri", *uri}};
    spec.stateless_method = "resources/read";
  } else {
    spec.not_found_code = kResourceNotFound;
  }
  return StartWork(id, params, reply, std::move(spec));
}

json McpSession::Impl::StartWork(const json& id, const json& params,
                                 const std::shared_ptr<ReplySink>& reply, WorkSpec spec) {
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    auto tp = meta->find("traceparent");
    // Longer than any version's fields is not worth keeping (trace_context.h parses it).
    if (tp != meta->end() && tp->is_string() && tp->get_ref<const std::string&>().size() <= 256) {
      spec.traceparent = tp->get<std::string>();
    }
  }
  if (!spec.stateless_method.empty()) {
    auto meta = params.find("_meta");
    if (meta != params.end() && meta->is_object()) {
      auto declared = meta->find(kMetaClientCapabilities);
      if (declared != meta->end()) spec.client_capabilities = UsableCapabilities(*declared);
    }
  } else {
    codemode::MutexLock lock(&mu);
    spec.client_capabilities = client_capabilities;
  }
  auto token = std::make_shared<codemode::CancelToken>();
  const std::string key = IdKey(id);
  // Counted before anything else is kept for the call, and held by its worker (with the
  // work and its arguments) until the response is sent: refused past a bound, no thread.
  std::shared_ptr<CallLimits::Ticket> ticket;  // shared: a std::function must be copyable
  if (options.call_limits) {
    absl::StatusOr<CallLimits::Ticket> acquired =
        options.call_limits->Acquire(self->credential(), spec.read, spec.bytes);
    if (!acquired.ok()) {
      const std::string why(acquired.status().message());
      spdlog::warn("mcp session {}: refused {}: {}", self->key(), codemode::LogText(spec.what),
                   codemode::LogLongText(why));
      return MakeError(id, kInternalError, why);
    }
    ticket = std::make_shared<CallLimits::Ticket>(std::move(*acquired));
    if (ticket->waiting()) {  // a read in line for its slot: it waits on its own thread
      spec.work = [work = std::move(spec.work), ticket](ToolCallContext& context) -> absl::StatusOr<json> {
        if (absl::Status s = ticket->AwaitRead(context.cancel); !s.ok()) return s;
        return work(context);
      };
    }
  }
  {
    codemode::MutexLock lock(&mu);
    // Checked under the same lock as the insertion so Close() never misses a worker.
    if (closed) return MakeError(id, kInvalidRequest, "session is closed");
    if (static_cast<int>(in_flight.size() + listeners.size()) >= options.max_concurrent_calls) {
      return MakeError(id, kInternalError, "too many concurrent calls");
    }
    // The spec forbids reusing an id within a session; reusing one that is still in
    // flight would make cancellation ambiguous, so refuse it.
    if (in_flight.count(key) || listeners.count(key)) {
      return MakeError(id, kInvalidRequest, "request id is already in use");
    }
    in_flight[key] = InFlight{token, false};
    ++running_workers;
  }
  // The worker holds no reference to the session: Close() (also run by the destructor)
  // waits for running_workers to reach zero, and `workers` joins it. Were the worker to
  // keep the session alive instead, dropping the last outside reference would move
  // SessionClosed to some later moment on the worker's thread.
  absl::Status started = workers.Schedule([this, id, spec = std::move(spec), progress = ProgressToken(params),
                                           token, reply, ticket = std::move(ticket)]() mutable {
    RunWork(id, spec, progress, token, reply);
    // The arguments go before the ticket that charged them, and both before Close() can
    // return.
    spec.work = nullptr;
    if (ticket) ticket->Release();
    codemode::MutexLock lock(&mu);
    --running_workers;
  });
  if (!started.ok()) {
    codemode::MutexLock lock(&mu);
    in_flight.erase(key);
    --running_workers;
    return MakeError(id, kInternalError, absl::StrCat("cannot start the call: ", started.message()));
  }
  return nullptr;
}

decltype(ToolCallContext::ask_client) McpSession::Impl::AskClient(
    const std::shared_ptr<ReplySink>& reply, const std::shared_ptr<codemode::CancelToken>& token) {
  return [this, reply, token](const std::string& method, json params, absl::Duration timeout,
                              const std::shared_ptr<codemode::CancelToken>& also) {
    if (!also) return client_requests.Ask(reply, method, std::move(params), timeout, token);
    // Either ends the wait: this request's cancellation, or the end of what asks.
    auto either = std::make_shared<codemode::CancelToken>();
    token->OnCancel([either] { either->Cancel("the request was cancelled"); });
    also->OnCancel([either] { either->Cancel("the run ended"); });
    return client_requests.Ask(reply, method, std::move(params), timeout, either);
  };
}

void McpSession::Impl::RunWork(const json& id, const WorkSpec& spec, const json& progress_token,
                               const std::shared_ptr<codemode::CancelToken>& token,
                               const std::shared_ptr<ReplySink>& reply) {
  const std::string& what = spec.what;
  const bool stateless = !spec.stateless_method.empty();
  auto progress = std::make_shared<ProgressState>();
  ToolCallContext context;
  context.cancel = token;
  // A stateless request belongs to no MCP session, even on a connection that has one: what
  // it runs in is named by its arguments (a sandbox handle).
  if (!stateless && !self->key().empty()) context.mcp_session = self->key();
  context.credential = self->credential();
  if (options.ceiling) {
    // No bound of its own: what refuses is the share or the ceiling, named in the refusal.
    codemode::ByteBudget::Parents parents = options.ceiling->Shares(context.credential);
    parents.push_back(options.ceiling->all());
    context.budget = std::make_shared<codemode::ByteBudget>(
        "max_buffered_bytes", std::numeric_limits<size_t>::max(), std::move(parents));
  }
  context.protocol_version = stateless ? kStatelessVersion : self->protocol_version();
  context.client_capabilities = spec.client_capabilities;
  // A stateless request asks by input_required results instead (adapter/pending_runs.h).
  if (!stateless && reply) context.ask_client = AskClient(reply, token);
  context.stateless = spec.stateless_method == "tools/call";
  context.request_state = spec.request_state;
  context.input_responses = spec.input_responses;
  context.trace_parent = codemode::telemetry::TraceContext::Parse(spec.traceparent);
  context.resources_changed = [this] { self->NotifyResourcesChanged(); };
  // None when the client asked for none: then nobody builds progress messages for it.
  if (!progress_token.is_null() && reply) {
    context.progress = [progress, progress_token, token, reply](
                           double value, std::optional<double> total, const std::string& message) {
      if (!std::isfinite(value)) return;
      // Sending under the lock keeps notifications in order and guarantees none follows
      // the response (RunWork sets `done` under the same lock before answering).
      codemode::MutexLock lock(&progress->mu);
      if (progress->done || token->cancelled()) return;
      if (progress->last && value <= *progress->last) return;  // must strictly increase
      progress->last = value;
      json params = {{"progressToken", progress_token}, {"progress", value}};
      if (total && std::isfinite(*total)) params["total"] = *total;
      if (!message.empty()) params["message"] = message;
      reply->Send(MakeNotification("notifications/progress", std::move(params)));
    };
  }

  json response;
  try {
    response = WorkResponse(id, spec.work(context), spec.not_found_code, spec.not_found_data);
    if (stateless) response = Stateless(std::move(response), spec.stateless_method);
  } catch (const std::exception& e) {
    spdlog::error("mcp session {}: {} threw: {}", self->key(), codemode::LogText(what),
                  codemode::LogLongText(e.what()));
    response = MakeError(id, kInternalError, what + " failed: " + e.what());
  } catch (...) {
    response = MakeError(id, kInternalError, what + " failed");
  }
  {
    codemode::MutexLock lock(&progress->mu);
    progress->done = true;
  }
  bool suppress;
  {
    codemode::MutexLock lock(&mu);
    auto it = in_flight.find(IdKey(id));
    // After notifications/cancelled the client no longer expects an answer; after Close()
    // nobody is listening.
    suppress = closed || (it != in_flight.end() && it->second.cancelled_by_client);
    if (it != in_flight.end()) in_flight.erase(it);
  }
  if (!suppress && reply) reply->Send(response);
  if (reply) reply->Close();
}

}  // namespace gateway
