// SessionManager: re-attaching the sessions a previous sandboxd left (Recover), from their
// records and their still-running containers, before the daemon serves.
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "sandboxd/log.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {

absl::Status SessionManager::Recover() {
  absl::StatusOr<std::vector<ContainerSummary>> containers = factory_.ListLeftOver();
  if (!containers.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot list containers of the previous run: ",
                                               containers.status().message()));
  }
  absl::StatusOr<SessionRecords::Loaded> loaded = records_.Load();
  if (!loaded.ok()) {
    // Removing "stale" containers now could end sessions whose records are only out of
    // reach for the moment; they stay until a start that can read the records.
    spdlog::error("cannot read the session records ({}); the {} container(s) of the previous "
                  "run are left alone", loaded.status().message(), containers->size());
    return absl::OkStatus();
  }
  std::map<std::string, ContainerSummary> by_name;
  for (auto& c : *containers) by_name[c.name] = c;
  std::set<std::string> kept;
  auto drop = [this](const std::string& id, const std::string& why) {
    spdlog::warn("session {} cannot be re-attached: {}", codemode::LogText(id),
                 codemode::LogLongText(why));
    if (absl::Status st = records_.Remove(id); !st.ok()) {
      spdlog::error("cannot remove the record of session {}: {}", codemode::LogText(id),
                    codemode::LogLongText(st.message()));
    }
  };
  for (const auto& [id, why] : loaded->broken) drop(id, why);
  std::vector<absl::StatusOr<std::unique_ptr<RunnerConnection>>> conns =
      ConnectRunners(loaded->records, by_name);
  for (size_t i = 0; i < loaded->records.size(); ++i) {
    const SessionRecord& record = loaded->records[i];
    std::string why;
    if (Reattach(record, by_name, std::move(conns[i]), &why)) {
      kept.insert(record.container_name);
    } else {
      drop(record.session.id(), why);
    }
  }
  factory_.Sweep(*containers, kept);
  return absl::OkStatus();
}

// Every running container's runner at once, each given 5 s to say ready: a runner that
// keeps its answer (or code in the session holding the connection) costs the restart those
// 5 s once, not 5 s per session one after another while nobody is served.
std::vector<absl::StatusOr<std::unique_ptr<RunnerConnection>>> SessionManager::ConnectRunners(
    const std::vector<SessionRecord>& records,
    const std::map<std::string, ContainerSummary>& containers) {
  std::vector<absl::StatusOr<std::unique_ptr<RunnerConnection>>> conns;
  conns.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) conns.emplace_back(absl::NotFoundError("its container is gone"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string& name = records[i].container_name;
    auto it = containers.find(name);
    if (it == containers.end() || !it->second.running) continue;
    factory_.SealSocketDir(name);  // records of older versions left it writable
    const std::string path = factory_.SocketDir(name) + "/runner.sock";
    threads.push_back(codemode::StartThread("reattach", [&conns, i, path] {
      conns[i] = RunnerConnection::Connect(path, absl::Seconds(5));
    }));
  }
  for (std::thread& t : threads) t.join();
  return conns;
}

bool SessionManager::Reattach(const SessionRecord& record,
                              const std::map<std::string, ContainerSummary>& containers,
                              absl::StatusOr<std::unique_ptr<RunnerConnection>> conn,
                              std::string* why) {
  const std::string& name = record.container_name;
  auto it = containers.find(name);
  if (it == containers.end() || !it->second.running) {
    *why = "its container is gone";
    return false;
  }
  absl::StatusOr<Catalog> catalog = Catalog::FromProto(record.catalog);
  if (!catalog.ok()) {
    *why = std::string(catalog.status().message());
    return false;
  }
  if (!conn.ok()) {
    *why = std::string(conn.status().message());
    return false;
  }
  if (absl::Status s = factory_.CheckRunnerToken(name, (*conn)->ready()); !s.ok()) {
    *why = std::string(s.message());
    return false;
  }
  // What was noted when the container started, before its code ran: the runner's socket
  // now names whoever last called listen() on it, which the session's code can be.
  factory_.NoteProcesses(name, record.init);
  const sandbox::v1::Session& sp = record.session;
  Session::Metadata md;
  md.id = sp.id();
  md.label = sp.label();
  md.owner = sp.owner();
  md.container_name = name;
  md.container_id = it->second.id;
  md.limits = FromProto(sp.limits());
  md.isolation = FromProto(sp.isolation(), Isolation::kContainer);  // older records: runc
  md.image = sp.image().empty() ? kDefaultImageName : sp.image();
  md.language = ParseLanguage(sp.runtime()).value_or(Language::kPython);  // older records: ""
  md.created_at_ms = sp.created_at_ms();
  if (auto uid = it->second.labels.find(kUidLabel); uid != it->second.labels.end()) {
    uint32_t value = 0;
    if (absl::SimpleAtoi(uid->second, &value)) md.uid_lease = factory_.ClaimUid(value);
  }
  std::unique_ptr<SessionEgress> egress;
  if (!sp.egress_policy().empty()) {
    egress = ReopenEgress(sp.egress_policy(), record.egress_bytes_used, &md, **conn);
  }
  uint64_t execs = (*conn)->ready().execs;
  auto session = Session::Create(&env_, std::move(md), std::move(*catalog), std::move(*conn),
                                 /*push_catalog=*/false);
  if (egress) session->AttachEgress(std::move(egress));
  records_.Adopt(sp.id());
  bool stopping;
  {
    codemode::MutexLock lock(&mu_);
    stopping = stopping_;
    if (!stopping) sessions_[sp.id()] = session;
  }
  if (stopping) {
    // Shutdown began during the recovery (it detached the sessions registered before):
    // this one stays for the next start too, never registered in a manager that stopped.
    session->Detach();
    return true;
  }
  if (session->lost()) OnSessionLost(*session);  // lost before it was registered
  spdlog::info("re-attached session {} (container {}, {} executions in its namespace)",
               codemode::LogText(sp.id()), codemode::LogText(name), execs);
  return true;
}

}  // namespace sandboxd
