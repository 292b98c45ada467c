// The parser of a run's arguments. See run_arguments.h.
#include "bridge/run_arguments.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gateway {
namespace {

using nlohmann::json;

absl::Status Invalid(const std::string& m) { return absl::InvalidArgumentError(m); }

// The value of an optional argument, or nullptr when absent or null.
const json* Optional(const json& args, const char* name) {
  auto it = args.find(name);
  return it == args.end() || it->is_null() ? nullptr : &*it;
}

bool IsSessionName(const std::string& name) {
  if (name.empty() || name.size() > kMaxSessionName) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<double> ParseTimeout(const json* t, const RunLimits& limits) {
  if (!t) return static_cast<double>(limits.default_timeout_seconds);
  if (!t->is_number() || !(t->get<double>() >= kMinTimeoutSeconds) ||
      t->get<double>() > limits.max_timeout_seconds) {
    return Invalid(absl::StrCat("'timeout_seconds' must be a number in [", kMinTimeoutSeconds,
                                ", ", limits.max_timeout_seconds, "]"));
  }
  return t->get<double>();
}

absl::StatusOr<ServerAllowlist> ParseServers(const json* s,
                                             const std::vector<UpstreamStatus>& upstreams) {
  if (!s) return ServerAllowlist::All();
  if (!s->is_array()) return Invalid("'servers' must be an array of server names");
  std::set<std::string> allowed;
  for (const auto& v : *s) {
    if (!v.is_string()) return Invalid("'servers' must be an array of server names");
    const std::string name = v.get<std::string>();
    bool known = false;
    for (const auto& u : upstreams) known |= u.name == name;
    if (!known) return Invalid(absl::StrCat("unknown server '", name, "' in 'servers'"));
    allowed.insert(name);
  }
  return ServerAllowlist::Only(std::move(allowed));
}

}  // namespace

ServerAllowlist ServerAllowlist::Only(std::set<std::string> servers) {
  ServerAllowlist a;
  a.all_ = false;
  a.servers_ = std::move(servers);
  return a;
}

bool ServerAllowlist::Allows(const std::string& server) const {
  return all_ || servers_.count(server) > 0;
}

namespace {

// `files`: {path: text | {"base64": text}}, within the limits.
absl::Status ParseFiles(const json* files, const RunLimits& limits, std::vector<RunFile>* out) {
  if (files == nullptr) return absl::OkStatus();
  if (!files->is_object()) return Invalid("'files' must be an object: path -> text or {\"base64\": ...}");
  if (files->size() > limits.max_files) {
    return Invalid(absl::StrCat("'files' names ", files->size(), " files; at most ", limits.max_files));
  }
  uint64_t total = 0;
  for (const auto& [path, value] : files->items()) {
    const std::string shown = absl::StrCat("files['", path.substr(0, 64), "']");
    if (path.empty() || path.size() > 4096) return Invalid(absl::StrCat(shown, ": bad path"));
    RunFile file{path, ""};
    if (value.is_string()) {
      file.data = value.get<std::string>();
    } else if (value.is_object() && value.size() == 1 && value.contains("base64") &&
               value["base64"].is_string()) {
      if (!absl::Base64Unescape(value["base64"].get_ref<const std::string&>(), &file.data)) {
        return Invalid(absl::StrCat(shown, ".base64 is not base64"));
      }
    } else {
      return Invalid(absl::StrCat(shown, " must be text or {\"base64\": \"...\"}"));
    }
    total += file.data.size();
    if (total > limits.max_files_bytes) {
      return Invalid(absl::StrCat("'files' hold more than ", limits.max_files_bytes, " bytes"));
    }
    out->push_back(std::move(file));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunArguments> ParseRunArguments(const json& args,
                                               const std::vector<UpstreamStatus>& upstreams,
                                               const RunLimits& limits) {
  if (!args.is_object()) return Invalid("the arguments must be an object");
  for (const auto& [k, _] : args.items()) {
    if (k != "code" && k != "timeout_seconds" && k != "session" && k != "reset" && k != "servers" &&
        k != "files" && k != "sandbox") {
      return Invalid(absl::StrCat("unknown argument '", k, "'"));
    }
  }
  RunArguments run;
  const json* code = Optional(args, "code");
  if (!code || !code->is_string() || code->get_ref<const std::string&>().empty()) {
    return Invalid("'code' is required and must be a non-empty string");
  }
  if (const size_t size = code->get_ref<const std::string&>().size(); size > limits.max_code_bytes) {
    return Invalid(absl::StrCat("'code' is ", size, " bytes; the limit is ", limits.max_code_bytes,
                                " (the gateway's --max_code_bytes)"));
  }
  run.code = code->get<std::string>();
  absl::StatusOr<double> timeout = ParseTimeout(Optional(args, "timeout_seconds"), limits);
  if (!timeout.ok()) return timeout.status();
  run.timeout_seconds = *timeout;
  if (const json* s = Optional(args, "session")) {
    if (!s->is_string() || !IsSessionName(s->get<std::string>())) {
      return Invalid("'session' must be a name of 1-64 characters [A-Za-z0-9_-]");
    }
    run.session = s->get<std::string>();
    run.session_named = true;
  }
  if (const json* h = Optional(args, "sandbox")) {
    if (!h->is_string() || h->get_ref<const std::string&>().empty() ||
        h->get_ref<const std::string&>().size() > kMaxSandboxHandle) {
      return Invalid(absl::StrCat("'sandbox' must be the `sandbox` string of an earlier result (at most ",
                                  kMaxSandboxHandle, " characters)"));
    }
    if (Optional(args, "session")) {
      return Invalid("give 'sandbox' or 'session', not both: a handle already names its sandbox");
    }
    run.sandbox = h->get<std::string>();
  }
  if (const json* r = Optional(args, "reset")) {
    if (!r->is_boolean()) return Invalid("'reset' must be a boolean");
    run.reset = r->get<bool>();
  }
  absl::StatusOr<ServerAllowlist> servers = ParseServers(Optional(args, "servers"), upstreams);
  if (!servers.ok()) return servers.status();
  run.servers = *std::move(servers);
  if (absl::Status s = ParseFiles(Optional(args, "files"), limits, &run.files); !s.ok()) return s;
  return run;
}

}  // namespace gateway
