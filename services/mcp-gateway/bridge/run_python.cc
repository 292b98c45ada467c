// The run_python tool: argument validation, sandbox session bindings, tool-call routing
// and result formatting. See run_python.h.
#include "bridge/run_python.h"
#include "base/untrusted_json.h"

#include "catalog/catalog.h"

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;

constexpr char kToolName[] = "run_python";
// structuredContent.tool_calls lists at most this many calls of a run; the totals count all.
constexpr size_t kListedToolCalls = 100;

std::string FirstLine(const std::string& text, size_t max = 100) {
  std::string line = text.substr(0, text.find('\n'));
  line = std::string(absl::StripAsciiWhitespace(line));
  if (line.size() > max) line = line.substr(0, max - 3) + "...";
  return line;
}

// "name(a, b, c?)": required parameters plain, optional ones with '?'.
std::string Signature(const UpstreamTool& t) {
  std::vector<std::string> params;
  std::set<std::string> required;
  if (auto r = t.input_schema.find("required"); r != t.input_schema.end() && r->is_array()) {
    for (const auto& n : *r) {
      if (n.is_string()) required.insert(n.get<std::string>());
    }
  }
  if (auto p = t.input_schema.find("properties"); p != t.input_schema.end() && p->is_object()) {
    for (const auto& [name, _] : p->items()) {
      params.push_back(required.count(name) ? name : name + "?");
    }
  }
  return absl::StrCat(t.name, "(", absl::StrJoin(params, ", "), ")");
}

const char* StatusWord(Finished::Status s) {
  switch (s) {
    case Finished::OK: return "ok";
    case Finished::ERROR: return "error";
    case Finished::TIMEOUT: return "timeout";
    case Finished::CANCELLED: return "cancelled";
    case Finished::SESSION_LOST: return "session_lost";
    default: return "error";
  }
}

// Keeps the head and the tail of long text, which is what a reader needs most.
std::string Clip(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t head = max * 2 / 3, tail = max - head;
  return absl::StrCat(text.substr(0, head), "\n[... ", text.size() - head - tail,
                      " bytes omitted ...]\n", text.substr(text.size() - tail));
}

json InputSchema(uint32_t max_timeout) {
  return {
      {"type", "object"},
      {"properties",
       {{"code",
         {{"type", "string"},
          {"description",
           "Python 3.11 source. Top-level await works; the value of the last expression is "
           "returned; variables persist between calls."}}},
        {"timeout_seconds",
         {{"type", "number"},
          {"exclusiveMinimum", 0},
          {"maximum", max_timeout},
          {"description", "Execution timeout (the code is interrupted, variables are kept)."}}},
        {"session",
         {{"type", "string"},
          {"pattern", "^[A-Za-z0-9_-]{1,64}$"},
          {"description", "Name of an extra, independent session (default: your main one)."}}},
        {"reset",
         {{"type", "boolean"}, {"description", "Start from an empty namespace first."}}},
        {"servers",
         {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"description", "Only these upstream servers may be called in this run."}}}}},
      {"required", {"code"}},
      {"additionalProperties", false}};
}

json OutputSchema() {
  json nullable_string = {{"type", {"string", "null"}}};
  json props;
  props["status"] = {{"type", "string"},
                     {"enum", {"ok", "error", "timeout", "cancelled", "session_lost"}}};
  props["stdout"] = {{"type", "string"}};
  props["stderr"] = {{"type", "string"}};
  props["result"] = nullable_string;
  props["error"] = {{"type", {"object", "null"}},
                    {"properties",
                     {{"type", {{"type", "string"}}},
                      {"message", {{"type", "string"}}},
                      {"traceback", {{"type", "string"}}}}}};
  props["duration_ms"] = {{"type", "integer"}};
  json call_props;
  call_props["server"] = {{"type", "string"}};
  call_props["tool"] = {{"type", "string"}};
  call_props["ok"] = {{"type", "boolean"}};
  call_props["duration_ms"] = {{"type", "integer"}};
  props["tool_calls"] = {{"type", "array"},
                         {"description", "the run's first tool calls (at most 100)"},
                         {"items", {{"type", "object"}, {"properties", call_props}}}};
  props["tool_calls_total"] = {{"type", "integer"}};
  props["tool_calls_failed"] = {{"type", "integer"}};
  props["session"] = {{"type", "string"}};
  props["output_truncated"] = {{"type", "boolean"}};
  props["session_reset"] = {{"type", "boolean"}};
  props["note"] = nullable_string;
  return {{"type", "object"},
          {"properties", props},
          {"required", {"status", "stdout", "stderr", "result", "error", "duration_ms", "tool_calls"}}};
}

absl::Status Invalid(const std::string& m) { return absl::InvalidArgumentError(m); }

}  // namespace

std::string DescribeRunPython(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes) {
  std::string head =
      "Run Python 3 code in a sandbox (no network, no host files) with a persistent namespace: "
      "variables, imports and functions survive between calls. Top-level `await` works, the "
      "value of the last expression is returned, print() output comes back. Call MCP tools "
      "from the code as async functions; filter and join their results in Python and print "
      "only what you need.\n\n"
      "Example:\n"
      "  r = await mcp_server.tool_name(arg=\"value\")        # or: await tools[\"server.tool_name\"](...)\n"
      "  a, b = await asyncio.gather(mcp_x.t1(q=1), mcp_y.t2(q=2))   # concurrent calls\n"
      "  _search(\"keyword\"); _schema(\"server.tool\"); help(mcp_server.tool_name)   # discover\n"
      "A failing tool raises ToolError. Results: structured content as dict, JSON text parsed, "
      "else str or a list of content blocks.\n";
  // The Python names come from sandboxd's own catalog rules (sanitising, keywords,
  // collisions), so the description names exactly what the sandbox defines.
  std::map<std::string, std::string> py_names;
  if (absl::StatusOr<codemode::Catalog> c = codemode::Catalog::FromProto(BuildCatalog(upstreams, {}));
      c.ok()) {
    for (const auto& server : c->servers()) py_names[server.name] = server.py_name;
  }
  // Three levels of detail, the richest that fits.
  for (int level = 0; level < 3; ++level) {
    std::string body = "\nServers and tools:\n";
    if (upstreams.empty()) body += "(no upstream MCP servers are configured)\n";
    for (const auto& s : upstreams) {
      if (!s.connected) {
        body += absl::StrCat("- ", s.name, ": unavailable (", FirstLine(s.error, 120), ")\n");
        continue;
      }
      if (level == 2) {
        body += absl::StrCat("- ", s.name, " (", py_names[s.name], "): ", s.tools.size(), " tools\n");
        continue;
      }
      const std::string& py = py_names[s.name];
      body += absl::StrCat("- ", s.name, " (", py, "):\n");
      for (const auto& t : s.tools) {
        body += level == 0 ? absl::StrCat("    ", Signature(t), " - ", FirstLine(t.description), "\n")
                           : absl::StrCat("    ", t.name, "\n");
      }
    }
    if (head.size() + body.size() <= max_bytes || level == 2) {
      if (level > 0) body += "Use _search(text) or _schema(name) inside the code for details.\n";
      std::string out = head + body;
      if (out.size() > max_bytes) out = out.substr(0, max_bytes - 60) + "\n[... more servers: use _discover() ...]\n";
      return out;
    }
  }
  return head;
}

sandbox::v1::Catalog BuildCatalog(const std::vector<UpstreamStatus>& upstreams,
                                  const std::set<std::string>& allowed) {
  sandbox::v1::Catalog catalog;
  for (const auto& s : upstreams) {
    if (!s.connected || (!allowed.empty() && !allowed.count(s.name))) continue;
    auto* server = catalog.add_servers();
    server->set_name(s.name);
    server->set_description(s.instructions.substr(0, 2000));
    for (const auto& t : s.tools) {
      auto* tool = server->add_tools();
      tool->set_name(t.name);
      tool->set_description(t.description);
      tool->set_input_schema_json(t.input_schema.is_object() ? t.input_schema.dump() : "");
      if (t.output_schema.is_object()) tool->set_output_schema_json(t.output_schema.dump());
    }
  }
  return catalog;
}

RunPythonTool::RunPythonTool(SandboxClient* sandboxes, Upstreams* upstreams,
                             RunPythonOptions options)
    : sandboxes_(sandboxes), upstreams_(upstreams), options_(options) {}

RunPythonTool::~RunPythonTool() = default;

json RunPythonTool::ListTools() {
  json tool = {{"name", kToolName},
               {"title", "Run Python"},
               {"description", DescribeRunPython(upstreams_->Snapshot(), options_.max_description_bytes)},
               {"inputSchema", InputSchema(options_.max_timeout_seconds)},
               {"outputSchema", OutputSchema()},
               {"annotations", {{"readOnlyHint", false}, {"destructiveHint", true}, {"openWorldHint", true}}}};
  return json::array({tool});
}

std::vector<UpstreamStatus> RunPythonTool::CatalogView(const std::vector<UpstreamStatus>& snapshot) {
  std::vector<UpstreamStatus> view;
  codemode::MutexLock lock(&mu_);
  for (const auto& s : snapshot) {
    if (s.connected) {
      last_known_[s.name] = s;
      view.push_back(s);
    } else if (auto it = last_known_.find(s.name); it != last_known_.end()) {
      view.push_back(it->second);  // keeps `connected` from when it was up
    } else {
      view.push_back(s);
    }
  }
  return view;
}

absl::StatusOr<std::shared_ptr<RunPythonTool::Binding>> RunPythonTool::FindOrRegister(
    const std::string& session_key, const std::string& key) {
  codemode::MutexLock lock(&mu_);
  auto it = bindings_.find(key);
  if (it != bindings_.end()) return it->second;
  size_t named = 0;
  for (const auto& [k, _] : bindings_) named += k.rfind(session_key + "\x1f", 0) == 0;
  if (named >= options_.max_named_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this client already has ", named, " sandbox sessions (the limit)"));
  }
  auto b = std::make_shared<Binding>();
  bindings_[key] = b;
  return b;
}

void RunPythonTool::Forget(const std::string& key, const std::shared_ptr<Binding>& b) {
  codemode::MutexLock lock(&mu_);
  auto it = bindings_.find(key);
  if (it != bindings_.end() && it->second == b) bindings_.erase(it);
}

absl::StatusOr<json> RunPythonTool::CallTool(const std::string& name, const json& args,
                                             ToolCallContext& ctx) {
  if (name != kToolName) return Invalid(absl::StrCat("unknown tool '", name, "'"));
  // ---- arguments
  auto code_it = args.find("code");
  if (code_it == args.end() || !code_it->is_string() || code_it->get<std::string>().empty()) {
    return Invalid("'code' is required and must be a non-empty string");
  }
  const std::string code = code_it->get<std::string>();
  for (const auto& [k, _] : args.items()) {
    if (k != "code" && k != "timeout_seconds" && k != "session" && k != "reset" && k != "servers") {
      return Invalid(absl::StrCat("unknown argument '", k, "'"));
    }
  }
  double timeout_s = options_.default_timeout_seconds;
  if (auto t = args.find("timeout_seconds"); t != args.end() && !t->is_null()) {
    if (!t->is_number() || t->get<double>() <= 0 || t->get<double>() > options_.max_timeout_seconds) {
      return Invalid(absl::StrCat("'timeout_seconds' must be a number in (0, ",
                                  options_.max_timeout_seconds, "]"));
    }
    timeout_s = t->get<double>();
  }
  std::string session_name = "default";
  if (auto s = args.find("session"); s != args.end() && !s->is_null()) {
    if (!s->is_string() || s->get<std::string>().empty() || s->get<std::string>().size() > 64) {
      return Invalid("'session' must be a name of 1-64 characters [A-Za-z0-9_-]");
    }
    session_name = s->get<std::string>();
    for (char c : session_name) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
        return Invalid("'session' must be a name of 1-64 characters [A-Za-z0-9_-]");
      }
    }
  }
  bool reset = false;
  if (auto r = args.find("reset"); r != args.end() && !r->is_null()) {
    if (!r->is_boolean()) return Invalid("'reset' must be a boolean");
    reset = r->get<bool>();
  }
  std::vector<UpstreamStatus> upstreams = upstreams_->Snapshot();
  uint64_t catalog_version = upstreams_->catalog_version();
  std::set<std::string> allowed;
  if (auto s = args.find("servers"); s != args.end() && !s->is_null()) {
    if (!s->is_array()) return Invalid("'servers' must be an array of server names");
    for (const auto& v : *s) {
      if (!v.is_string()) return Invalid("'servers' must be an array of server names");
      std::string n = v.get<std::string>();
      bool known = false;
      for (const auto& u : upstreams) known |= u.name == n;
      if (!known) return Invalid(absl::StrCat("unknown server '", n, "' in 'servers'"));
      allowed.insert(n);
    }
    if (allowed.empty()) allowed.insert("\x1f(none)");  // an empty list allows nothing
  }
  std::string allowed_key = absl::StrJoin(allowed, ",");
  sandbox::v1::Catalog catalog = BuildCatalog(CatalogView(upstreams), allowed);

  // ---- the sandbox session bound to (MCP session, name)
  const std::string key = ctx.session_key + "\x1f" + session_name;
  std::vector<std::string> notes;
  bool session_reset = false;
  std::shared_ptr<Binding> binding;

  auto error_result = [&](const std::string& message) -> json {
    json structured = {{"status", "error"}, {"stdout", ""}, {"stderr", ""}, {"result", nullptr},
                       {"error", {{"type", "SandboxUnavailable"}, {"message", message}, {"traceback", ""}}},
                       {"duration_ms", 0}, {"tool_calls", json::array()}, {"tool_calls_total", 0},
                       {"tool_calls_failed", 0}, {"session", session_name},
                       {"output_truncated", false}, {"session_reset", false}, {"note", nullptr}};
    return {{"content", {{{"type", "text"}, {"text", "[error] " + message}}}},
            {"structuredContent", structured},
            {"isError", true}};
  };

  // ---- run (retried once on a fresh session when the old one is gone)
  codemode::Mutex stats_mu;
  json tool_calls = json::array();
  uint64_t tool_calls_total = 0;
  uint64_t tool_calls_failed = 0;
  // Progress goes out from the stream reader (output) and from tool-call threads
  // (upstream progress), and must strictly increase: one counter under one lock.
  codemode::Mutex progress_mu;
  uint64_t progress_n = 0;
  auto report = [&](const std::string& message) {
    if (!ctx.progress) return;
    codemode::MutexLock lock(&progress_mu);
    ctx.progress(static_cast<double>(++progress_n), std::nullopt, message);
  };
  absl::StatusOr<Finished> finished = absl::UnknownError("not run");
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!binding) {
      absl::StatusOr<std::shared_ptr<Binding>> found = FindOrRegister(ctx.session_key, key);
      if (!found.ok()) return error_result(std::string(found.status().message()));
      binding = *found;
    }
    codemode::MutexLock run_lock(&binding->run_mu);
    if (!binding->Ready()) {
      // The first run on this binding creates its sandbox session; concurrent runs of the
      // same MCP session and name wait on run_mu above and then use it.
      absl::StatusOr<SandboxRef> ref =
          sandboxes_->CreateSession(absl::StrCat("mcp:", ctx.session_key), session_name, catalog);
      if (!ref.ok()) return error_result(std::string(ref.status().message()));
      if (!binding->SetReady(*ref)) {
        // The MCP session ended while the sandbox session was being created.
        (void)sandboxes_->DeleteSession(*ref);
        return error_result("the MCP session was closed");
      }
      binding->catalog_version = catalog_version;
      binding->allowed_key = allowed_key;
    }
    if (reset && attempt == 0) {
      absl::Status s = sandboxes_->ResetSession(binding->ref);
      if (!s.ok() && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) {
        return error_result(std::string(s.message()));
      }
    }
    bool send_catalog = binding->catalog_version != catalog_version || binding->allowed_key != allowed_key;
    auto calls_token = std::make_shared<codemode::CancelToken>();
    if (ctx.cancel) ctx.cancel->OnCancel([calls_token] { calls_token->Cancel("the run was cancelled"); });
    ExecuteHandlers handlers;
    handlers.on_output = [&](bool is_stderr, const std::string& text) { report(text); };
    handlers.on_tool_call = [&, calls_token](const sandbox::v1::ToolCall& call) {
      sandbox::v1::ToolResult r;
      r.set_call_id(call.call_id());
      auto started = std::chrono::steady_clock::now();
      bool ok = false;
      // sandboxd checked the arguments, but the gateway trusts no peer's JSON.
      absl::StatusOr<json> arguments = codemode::ParseUntrustedJson(call.arguments_json(), "arguments");
      if (!allowed.empty() && !allowed.count(call.server())) {
        r.set_error(absl::StrCat(call.server(), ".", call.tool(), ": server '", call.server(),
                                 "' is not allowed in this run"));
      } else if (!arguments.ok()) {
        r.set_error(absl::StrCat(call.server(), ".", call.tool(), ": ", arguments.status().message()));
      } else {
        CallOptions opts;
        opts.cancel = calls_token;
        // Upstream progress reaches the client as progress of this run.
        const std::string prefix = call.server() + "." + call.tool();
        opts.on_progress = [&report, prefix](const json& params) {
          // Upstream input: check types, nlohmann::json::value() throws on a mismatch.
          auto m = params.find("message");
          std::string message =
              prefix + ": " + (m != params.end() && m->is_string() ? m->get<std::string>() : "progress");
          if (params.contains("progress") && params["progress"].is_number()) {
            message += " (" + params["progress"].dump();
            if (params.contains("total") && params["total"].is_number()) message += "/" + params["total"].dump();
            message += ")";
          }
          report(message + "\n");
        };
        absl::StatusOr<json> result = upstreams_->CallTool(call.server(), call.tool(), *arguments, opts);
        if (result.ok()) {
          r.set_result_json(result->dump());
          auto e = result->find("isError");
          ok = !(e != result->end() && e->is_boolean() && e->get<bool>());
        } else {
          r.set_error(absl::StrCat(call.server(), ".", call.tool(), ": ", result.status().message()));
        }
      }
      int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - started).count();
      codemode::MutexLock lock(&stats_mu);
      ++tool_calls_total;
      if (!ok) ++tool_calls_failed;
      // A run may make thousands of calls: the result lists the first few, counts all.
      if (tool_calls.size() < kListedToolCalls) {
        tool_calls.push_back({{"server", call.server()}, {"tool", call.tool()}, {"ok", ok}, {"duration_ms", ms}});
      }
      return r;
    };
    handlers.on_stream_end = [calls_token] { calls_token->Cancel("the execution finished"); };
    finished = sandboxes_->Execute(binding->ref, code, static_cast<uint32_t>(timeout_s * 1000),
                                   send_catalog ? &catalog : nullptr, handlers, ctx.cancel);
    if (finished.ok()) {
      if (send_catalog) {
        binding->catalog_version = catalog_version;
        binding->allowed_key = allowed_key;
      }
      break;
    }
    if ((absl::IsNotFound(finished.status()) || absl::IsFailedPrecondition(finished.status())) &&
        attempt == 0) {
      // The sandbox session is gone (container killed, sandboxd restarted without it).
      notes.push_back(absl::StrCat("the previous sandbox session was lost (",
                                   finished.status().message(),
                                   "); this ran in a new session, so earlier variables are gone"));
      session_reset = true;
      Forget(key, binding);
      binding.reset();
      continue;
    }
    break;
  }
  if (!finished.ok()) return error_result(std::string(finished.status().message()));

  const Finished& f = *finished;
  if (f.status() == Finished::SESSION_LOST) {
    Forget(key, binding);
    notes.push_back("the sandbox session was lost; the next run starts in a new session");
  }
  // ---- the text the model reads, and the structured twin
  std::string text;
  if (!f.stdout().empty()) text += Clip(f.stdout(), options_.max_text_bytes / 2);
  if (!f.stderr().empty()) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "[stderr]\n" + Clip(f.stderr(), options_.max_text_bytes / 4);
  }
  auto line = [&](const std::string& s) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += s + "\n";
  };
  if (!f.result_repr().empty()) line("[result] " + Clip(f.result_repr(), options_.max_text_bytes / 4));
  if (f.has_error() && !f.error().type().empty()) {
    line(absl::StrCat("[", StatusWord(f.status()), "] ", f.error().type(), ": ", f.error().message()));
    if (!f.error().traceback().empty()) text += Clip(f.error().traceback(), options_.max_text_bytes / 4);
  }
  if (f.output_truncated()) line("[note] output was truncated");
  if (tool_calls_total > tool_calls.size()) {
    notes.push_back(absl::StrCat(tool_calls_total, " tool calls (", tool_calls_failed,
                                 " failed); tool_calls lists the first ", tool_calls.size()));
  }
  for (const auto& n : notes) line("[note] " + n);
  if (text.empty()) text = "(no output)";

  json structured = {
      {"status", StatusWord(f.status())},
      {"stdout", f.stdout()},
      {"stderr", f.stderr()},
      {"result", f.result_repr().empty() ? json(nullptr) : json(f.result_repr())},
      {"error", f.has_error() && !f.error().type().empty()
                    ? json{{"type", f.error().type()}, {"message", f.error().message()},
                           {"traceback", f.error().traceback()}}
                    : json(nullptr)},
      {"duration_ms", f.duration_ms()},
      {"tool_calls", tool_calls},
      {"tool_calls_total", tool_calls_total},
      {"tool_calls_failed", tool_calls_failed},
      {"session", session_name},
      {"output_truncated", f.output_truncated()},
      {"session_reset", session_reset},
      {"note", notes.empty() ? json(nullptr) : json(absl::StrJoin(notes, "; "))}};
  return json{{"content", {{{"type", "text"}, {"text", text}}}},
              {"structuredContent", structured},
              {"isError", f.status() != Finished::OK}};
}

void RunPythonTool::SessionClosed(const std::string& session_key) {
  std::vector<std::shared_ptr<Binding>> doomed;
  {
    codemode::MutexLock lock(&mu_);
    for (auto it = bindings_.begin(); it != bindings_.end();) {
      if (it->first.rfind(session_key + "\x1f", 0) == 0) {
        doomed.push_back(it->second);
        it = bindings_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& b : doomed) {
    // A binding whose session is still being created deletes it itself (SetReady).
    std::optional<SandboxRef> ref = b->Close();
    if (!ref) continue;
    absl::Status s = sandboxes_->DeleteSession(*ref);
    if (!s.ok() && !absl::IsNotFound(s)) {
      spdlog::warn("cannot delete sandbox session {}: {}", ref->session_id, std::string(s.message()));
    }
  }
}

void RunPythonTool::CloseAll() {
  std::vector<std::string> keys;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [k, _] : bindings_) keys.push_back(k.substr(0, k.find('\x1f')));
  }
  for (const auto& k : keys) SessionClosed(k);
}

}  // namespace gateway
