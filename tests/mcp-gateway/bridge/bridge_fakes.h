// Fakes of the bridge's two seams: FakeSandboxes (sandboxd) and FakeUpstreams (the
// upstream MCP servers). Both record what they were asked and can be told to fail; the
// fake sandbox "runs" code by calling a script the test provides, which may make tool calls
// through the handlers exactly as sandboxd's Execute stream does.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "bridge/sandboxes.h"
#include "bridge/upstreams.h"

namespace gateway::testing {

class FakeSandboxes : public Sandboxes {
 public:
  struct Execution {
    std::string session_id;
    std::string code;
    uint32_t timeout_ms = 0;
    bool catalog_sent = false;
    sandbox::v1::Catalog catalog;
    std::string runtime;  // ExecuteHandlers::runtime: the language the code was sent as
  };
  // Runs code: by default prints it back and finishes OK.
  using Script = std::function<absl::StatusOr<sandbox::v1::Finished>(
      const Execution&, const ExecuteHandlers&, std::shared_ptr<codemode::CancelToken>)>;

  std::string EndpointName(size_t endpoint) const override { return absl::StrCat("fake", endpoint); }
  std::optional<size_t> FindEndpoint(const std::string& name) const override {
    if (name == "fake0") return 0;
    return std::nullopt;
  }
  absl::StatusOr<SandboxRef> CreateSession(const std::string& owner, const std::string& label,
                                           const sandbox::v1::Catalog& catalog,
                                           const Room& room, const std::string& runtime,
                                           const std::string& egress_policy) override {
    if (before_create) before_create();
    codemode::MutexLock lock(&mu_);
    egress_policies_.push_back(egress_policy);
    if (!create_error.ok()) return create_error;
    if (refuse_egress) {
      if (absl::Status s = refuse_egress(egress_policy); !s.ok()) return s;
    }
    rooms_.push_back(room);
    SandboxRef ref{0, absl::StrCat("s", ++created_), runtime};
    live_.insert(ref.session_id);
    creations_.push_back({owner, label, ref.session_id});
    runtimes_[ref.session_id] = runtime;
    catalogs_[ref.session_id] = catalog;
    return ref;
  }
  absl::Status DeleteSession(const SandboxRef& ref) override {
    codemode::MutexLock lock(&mu_);
    ++delete_attempts_;
    if (!delete_error.ok()) return delete_error;
    deleted_.push_back(ref.session_id);
    return live_.erase(ref.session_id) ? absl::OkStatus() : absl::NotFoundError("no such session");
  }
  Owned ListOwned(const std::string& owner, absl::Time deadline, std::shared_ptr<codemode::CancelToken>) override {
    {
      codemode::MutexLock lock(&mu_);
      owned_deadlines_.push_back(deadline);
    }
    codemode::MutexLock lock(&mu_);
    Owned owned;
    owned.complete = !list_owned_incomplete;
    for (const Creation& c : creations_) {
      if (c.owner == owner && live_.count(c.session_id)) {
        owned.refs.push_back({0, c.session_id, runtimes_[c.session_id]});
        uint64_t runs = 0;
        for (const Execution& e : executions_) runs += e.session_id == c.session_id;
        owned.executions.push_back(runs);
      }
    }
    return owned;
  }
  absl::Status ResetSession(const SandboxRef& ref) override {
    codemode::MutexLock lock(&mu_);
    resets_.push_back(ref.session_id);
    return live_.count(ref.session_id) ? absl::OkStatus() : absl::NotFoundError("no such session");
  }
  absl::Status UploadFile(const SandboxRef& ref, const std::string& path, const std::string& data,
                          std::shared_ptr<codemode::CancelToken>) override {
    codemode::MutexLock lock(&mu_);
    uploads_.push_back({ref.session_id, path, data, executions_.size()});
    if (!live_.count(ref.session_id)) return absl::NotFoundError("no such session");
    if (path.rfind("..", 0) == 0) return absl::InvalidArgumentError("'..' is not allowed");
    files_[ref.session_id][path] = {data, ++clock_};
    return absl::OkStatus();
  }
  // The workspace is a map of path -> bytes; directories are the prefixes of its paths.
  absl::StatusOr<sandbox::v1::ListFilesResponse> ListFiles(
      const SandboxRef& ref, const std::string& dir, uint32_t max_entries, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) override {
    if (before_list) before_list(dir, cancel);
    if (before_list_of) before_list_of(ref.session_id, cancel);
    if (absl::Status held = HoldIfStalled(ref, deadline); !held.ok()) return held;
    codemode::MutexLock lock(&mu_);
    ++list_calls_;
    list_tokens_.push_back(cancel);
    if (!live_.count(ref.session_id)) return absl::NotFoundError("no such session");
    if (list_answer) return list_answer(dir, max_entries);
    std::map<std::string, sandbox::v1::FileInfo> entries;  // by path
    const std::string prefix = dir + "/";
    for (const auto& [path, file] : files_[ref.session_id]) {
      if (path.compare(0, prefix.size(), prefix) != 0) continue;
      const size_t slash = path.find('/', prefix.size());
      sandbox::v1::FileInfo info;
      info.set_path(path.substr(0, slash));
      info.set_type(slash == std::string::npos ? sandbox::v1::FILE_TYPE_FILE
                                               : sandbox::v1::FILE_TYPE_DIRECTORY);
      if (slash == std::string::npos) info.set_size(file.data.size());
      info.set_mtime_ms(file.mtime_ms);
      entries[info.path()] = info;
    }
    if (entries.empty()) return absl::NotFoundError(absl::StrCat("no directory ", dir));
    sandbox::v1::ListFilesResponse resp;
    for (const auto& [path, info] : entries) {
      if (static_cast<uint32_t>(resp.files_size()) == max_entries) {
        resp.set_truncated(true);
        break;
      }
      *resp.add_files() = info;
    }
    return resp;
  }
  absl::StatusOr<std::string> DownloadFile(
      const SandboxRef& ref, const std::string& path, size_t max_bytes, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) override {
    if (before_download) {
      if (absl::Status s = before_download(path, cancel); !s.ok()) return s;
    }
    if (absl::Status held = HoldIfStalled(ref, deadline); !held.ok()) return held;
    codemode::MutexLock lock(&mu_);
    downloads_.push_back({ref.session_id, path});
    if (!live_.count(ref.session_id)) return absl::NotFoundError("no such session");
    auto it = files_[ref.session_id].find(path);
    if (it == files_[ref.session_id].end()) return absl::NotFoundError("no such file");
    if (it->second.data.size() > max_bytes) return absl::ResourceExhaustedError("too large");
    return it->second.data;
  }
  // Code "writes" a file (a newer mtime than any before).
  void PutFile(const std::string& session_id, const std::string& path, const std::string& data) {
    codemode::MutexLock lock(&mu_);
    files_[session_id][path] = {data, ++clock_};
  }
  void RemoveFile(const std::string& session_id, const std::string& path) {
    codemode::MutexLock lock(&mu_);
    files_[session_id].erase(path);
  }
  int list_calls() {
    codemode::MutexLock lock(&mu_);
    return list_calls_;
  }
  // Code of `session_id` holds its runner: its ListFiles and DownloadFile answer
  // DEADLINE_EXCEEDED at the call's deadline, or after kStallCap when it has none.
  static constexpr absl::Duration kStallCap = absl::Seconds(10);
  void Stall(const std::string& session_id) {
    codemode::MutexLock lock(&mu_);
    stalled_.insert(session_id);
  }
  // The deadline of every ListFiles and DownloadFile, in order; of every ListOwned.
  std::vector<absl::Time> file_deadlines() {
    codemode::MutexLock lock(&mu_);
    return file_deadlines_;
  }
  std::vector<absl::Time> owned_deadlines() {
    codemode::MutexLock lock(&mu_);
    return owned_deadlines_;
  }
  // The token each ListFiles came with, in order (nullptr when it came with none).
  std::vector<std::shared_ptr<codemode::CancelToken>> list_tokens() {
    codemode::MutexLock lock(&mu_);
    return list_tokens_;
  }
  struct Download {
    std::string session_id, path;
  };
  std::vector<Download> downloads() {
    codemode::MutexLock lock(&mu_);
    return downloads_;
  }
  struct Upload {
    std::string session_id, path, data;
    size_t executions_before = 0;  // how many executions had started when it came
  };
  std::vector<Upload> uploads() {
    codemode::MutexLock lock(&mu_);
    return uploads_;
  }
  absl::StatusOr<sandbox::v1::Finished> Execute(const SandboxRef& ref, const std::string& code,
                                                uint32_t timeout_ms,
                                                const sandbox::v1::Catalog* catalog,
                                                const ExecuteHandlers& handlers,
                                                std::shared_ptr<codemode::CancelToken> cancel) override {
    Execution e{ref.session_id, code, timeout_ms, catalog != nullptr,
                catalog ? *catalog : sandbox::v1::Catalog(), handlers.runtime};
    Script run;
    {
      codemode::MutexLock lock(&mu_);
      executions_.push_back(e);
      if (auto lost = lost_reasons_.find(ref.session_id); lost != lost_reasons_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost->second));
      }
      if (!live_.count(ref.session_id)) {
        return absl::NotFoundError(absl::StrCat("session ", ref.session_id, " not found"));
      }
      if (catalog) catalogs_[ref.session_id] = *catalog;
      run = script_;
    }
    absl::StatusOr<sandbox::v1::Finished> f = run ? run(e, handlers, cancel) : PrintCode(e);
    if (handlers.on_stream_end) handlers.on_stream_end();
    return f;
  }

  // The container of `session_id` died: sandboxd no longer knows it. With a `reason`,
  // sandboxd still answers for it: "session lost: <reason>" (FAILED_PRECONDITION).
  void Lose(const std::string& session_id, const std::string& reason = "") {
    codemode::MutexLock lock(&mu_);
    live_.erase(session_id);
    if (!reason.empty()) lost_reasons_[session_id] = reason;
  }
  void SetScript(Script s) {
    codemode::MutexLock lock(&mu_);
    script_ = std::move(s);
  }

  struct Creation {
    std::string owner, label, session_id;
  };
  // How each creation was allowed to make room, in order.
  // The runtime each session was created with, by session id.
  std::map<std::string, std::string> runtimes() {
    codemode::MutexLock lock(&mu_);
    return runtimes_;
  }
  std::vector<Room> rooms() {
    codemode::MutexLock lock(&mu_);
    return rooms_;
  }
  // The egress policy of each create asked for, in order (failed ones too).
  std::vector<std::string> egress_policies() {
    codemode::MutexLock lock(&mu_);
    return egress_policies_;
  }
  std::vector<Creation> creations() {
    codemode::MutexLock lock(&mu_);
    return creations_;
  }
  std::vector<Execution> executions() {
    codemode::MutexLock lock(&mu_);
    return executions_;
  }
  int delete_attempts() {
    codemode::MutexLock lock(&mu_);
    return delete_attempts_;
  }
  std::vector<std::string> deleted() {
    codemode::MutexLock lock(&mu_);
    return deleted_;
  }
  std::vector<std::string> resets() {
    codemode::MutexLock lock(&mu_);
    return resets_;
  }
  std::set<std::string> live() {
    codemode::MutexLock lock(&mu_);
    return live_;
  }
  sandbox::v1::Catalog catalog_of(const std::string& session_id) {
    codemode::MutexLock lock(&mu_);
    return catalogs_[session_id];
  }

  // Set before use (not guarded).
  absl::Status create_error = absl::OkStatus();
  // When set, judges each create's egress policy as sandboxd would (not OK: refused).
  std::function<absl::Status(const std::string& egress_policy)> refuse_egress;
  absl::Status delete_error = absl::OkStatus();  // sandboxd is down, say
  // When set, answers every ListFiles instead of the workspace (a hostile sandbox answers
  // sandboxd's file_list frames itself); called under the fake's lock.
  std::function<absl::StatusOr<sandbox::v1::ListFilesResponse>(const std::string& dir,
                                                               uint32_t max_entries)>
      list_answer;
  std::atomic<bool> list_owned_incomplete{false};  // ListOwned says an endpoint did not answer
  std::function<void()> before_create;  // runs outside the fake's lock
  // Runs first in ListFiles, outside the lock, with the directory and the call's token.
  std::function<void(const std::string& dir, std::shared_ptr<codemode::CancelToken>)> before_list;
  // The same, with the session listed.
  std::function<void(const std::string& session_id, std::shared_ptr<codemode::CancelToken>)> before_list_of;
  // Runs first in DownloadFile, outside the lock, with the call's token; a non-OK status
  // is the download's answer.
  std::function<absl::Status(const std::string& path, std::shared_ptr<codemode::CancelToken>)>
      before_download;

  static sandbox::v1::Finished PrintCode(const Execution& e) {
    sandbox::v1::Finished f;
    f.set_status(sandbox::v1::Finished::OK);
    f.set_stdout(absl::StrCat(e.session_id, ": ", e.code, "\n"));
    return f;
  }

 private:
  codemode::Mutex mu_;
  int created_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> live_ ABSL_GUARDED_BY(mu_);
  std::vector<Creation> creations_ ABSL_GUARDED_BY(mu_);
  std::vector<Room> rooms_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> egress_policies_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> runtimes_ ABSL_GUARDED_BY(mu_);
  std::vector<Execution> executions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> lost_reasons_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> deleted_ ABSL_GUARDED_BY(mu_);
  int delete_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> resets_ ABSL_GUARDED_BY(mu_);
  std::vector<Upload> uploads_ ABSL_GUARDED_BY(mu_);
  struct File {
    std::string data;
    int64_t mtime_ms = 0;
  };
  std::map<std::string, std::map<std::string, File>> files_ ABSL_GUARDED_BY(mu_);  // by session
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 1700000000000;
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<codemode::CancelToken>> list_tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<Download> downloads_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, sandbox::v1::Catalog> catalogs_ ABSL_GUARDED_BY(mu_);
  Script script_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> stalled_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> file_deadlines_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> owned_deadlines_ ABSL_GUARDED_BY(mu_);

  // Records the file call's deadline; for a stalled session, waits for it (see Stall).
  absl::Status HoldIfStalled(const SandboxRef& ref, absl::Time deadline) {
    {
      codemode::MutexLock lock(&mu_);
      file_deadlines_.push_back(deadline);
      if (!stalled_.count(ref.session_id)) return absl::OkStatus();
    }
    absl::SleepFor(std::min(deadline - absl::Now(), kStallCap));
    return absl::DeadlineExceededError("Deadline Exceeded");
  }
};

class FakeUpstreams : public Upstreams {
 public:
  struct Call {
    std::string server, tool;
    nlohmann::json arguments;
    CallOptions options;
  };
  // Answers a call; by default {"content":[{"type":"text","text":"server.tool"}]}.
  using Answer = std::function<absl::StatusOr<nlohmann::json>(const Call&)>;

  std::vector<UpstreamStatus> Snapshot() const override {
    codemode::MutexLock lock(&mu_);
    ++snapshots_;
    return servers_;
  }
  // How many times Snapshot() was called.
  int snapshots() const {
    codemode::MutexLock lock(&mu_);
    return snapshots_;
  }
  uint64_t catalog_version() const override { return version_.load(); }
  absl::StatusOr<nlohmann::json> CallTool(const std::string& server, const std::string& tool,
                                          const nlohmann::json& arguments,
                                          const CallOptions& options) override {
    Call c{server, tool, arguments, options};
    Answer answer;
    {
      codemode::MutexLock lock(&mu_);
      calls_.push_back(c);
      answer = answer_;
    }
    if (answer) return answer(c);
    return nlohmann::json{{"content", {{{"type", "text"}, {"text", server + "." + tool}}}}};
  }

  // Replaces the servers and bumps the catalog version.
  void SetServers(std::vector<UpstreamStatus> servers) {
    codemode::MutexLock lock(&mu_);
    servers_ = std::move(servers);
    ++version_;
  }
  // Replaces the servers and leaves the catalog version as it is: what a snapshot taken
  // before the last bump shows, as a slow reader may hand it on afterwards.
  void SetServersKeepingVersion(std::vector<UpstreamStatus> servers) {
    codemode::MutexLock lock(&mu_);
    servers_ = std::move(servers);
  }
  void SetAnswer(Answer a) {
    codemode::MutexLock lock(&mu_);
    answer_ = std::move(a);
  }
  std::vector<Call> calls() {
    codemode::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  mutable codemode::Mutex mu_;
  std::vector<UpstreamStatus> servers_ ABSL_GUARDED_BY(mu_);
  mutable int snapshots_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> version_{1};
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  Answer answer_ ABSL_GUARDED_BY(mu_);
};

// A connected server with tools named `tools`, each taking an optional "q".
inline UpstreamStatus Server(const std::string& name, std::vector<std::string> tools,
                             bool connected = true) {
  UpstreamStatus s;
  s.name = name;
  s.connected = connected;
  if (!connected) s.error = "connect: Connection refused";
  for (const auto& t : tools) {
    UpstreamTool tool;
    tool.name = t;
    tool.description = "Does " + t + ".";
    tool.input_schema = {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}};
    s.tools.push_back(tool);
  }
  return s;
}

// A server with `tools` tools named tool_0, tool_1, ..., each described on two lines and
// taking a required "query" and an optional "limit"; a server not connected says why.
inline UpstreamStatus NumberedServer(const std::string& name, int tools, bool connected = true) {
  UpstreamStatus s;
  s.name = name;
  s.connected = connected;
  s.error = connected ? "" : "connect: Connection refused";
  for (int i = 0; i < tools; ++i) {
    UpstreamTool t;
    t.name = "tool_" + std::to_string(i);
    t.description = "Does thing " + std::to_string(i) + ".\nMore detail that is not shown.";
    t.input_schema = {{"type", "object"},
                      {"properties", {{"query", {{"type", "string"}}}, {"limit", {{"type", "integer"}}}}},
                      {"required", {"query"}}};
    s.tools.push_back(t);
  }
  return s;
}

// A tool call as sandboxd relays it.
inline sandbox::v1::ToolCall ToolCallOf(const std::string& server, const std::string& tool,
                                        const std::string& arguments_json,
                                        const std::string& id = "c1") {
  sandbox::v1::ToolCall c;
  c.set_call_id(id);
  c.set_server(server);
  c.set_tool(tool);
  c.set_arguments_json(arguments_json);
  return c;
}

// A script for FakeSandboxes::SetScript: the code names the tool calls it makes, one after
// another ("github.delete_repo,github.search"), each with `arguments_json`; its stdout is
// each call's error ("-" when it went through), joined by "|".
inline FakeSandboxes::Script CallsNamedByCode(const std::string& arguments_json) {
  return [arguments_json](const FakeSandboxes::Execution& e, const ExecuteHandlers& h,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<sandbox::v1::Finished> {
    std::string out;
    for (absl::string_view call : absl::StrSplit(e.code, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> st = absl::StrSplit(call, '.');
      sandbox::v1::ToolResult r = h.on_tool_call(ToolCallOf(st.first, st.second, arguments_json), {});
      absl::StrAppend(&out, out.empty() ? "" : "|", r.error().empty() ? "-" : r.error());
    }
    sandbox::v1::Finished f;
    f.set_status(sandbox::v1::Finished::OK);
    f.set_stdout(out);
    return f;
  };
}

}  // namespace gateway::testing
