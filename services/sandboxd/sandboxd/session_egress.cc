// SessionManager's and Session's part of egress by policy (docs/egress.md): CreateSession
// admits a session's policy against the operator's maximum; the runner's relay is turned on
// and the session's proxy opened before the session is handed out (or re-attached, with the
// byte count of its record); SetEgressPolicy narrows it; the session keeps its quota's count
// in its record.
#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {

// Every isolation has egress: a container's runner and a wasm process alike host the relay
// that the proxy dials in to over egress.sock in the socket directory.
absl::StatusOr<std::string> SessionManager::AdmitEgress(const sandbox::v1::CreateSessionRequest& r) {
  if (!options_.egress) {
    if (r.egress_policy().empty()) return std::string();
    return absl::FailedPreconditionError("this sandboxd gives sessions no egress");
  }
  return options_.egress->Admit(r.egress_policy());
}

absl::StatusOr<std::unique_ptr<SessionEgress>> SessionManager::OpenEgress(
    const Session::Metadata& md, const std::string& policy, RunnerConnection& conn, bool wait,
    uint64_t bytes_used) {
  // A re-attached runner turned its relay on before the restart and answers `egress` again
  // at once, unless its code keeps it from answering: a restart does not wait for each one
  // (its egress_on reaches the session as a reply it ignores).
  if (!wait) {
    if (absl::Status s = conn.Send(MakeEgressFrame(0)); !s.ok()) return s;
    return options_.egress->Open(md.id, md.owner, policy, RelaySocket(md), codemode::UniqueFd(),
                                 bytes_used);
  }
  // A new container's runner, which has run no code of the session yet, hands its loopback
  // listener over, so that the proxy accepts the code's connections itself (no relay in
  // between). gVisor's sockets are not the host's, and a restart finds the runner running
  // the session's code: those relay (docs/egress.md, "The relay inside, and which side
  // dials").
  absl::StatusOr<codemode::UniqueFd> listener =
      conn.TurnEgressOn(options_.egress_on_timeout, md.isolation == Isolation::kContainer);
  if (!listener.ok()) return listener.status();
  return options_.egress->Open(md.id, md.owner, policy, RelaySocket(md), *std::move(listener),
                               bytes_used);
}

std::string SessionManager::RelaySocket(const Session::Metadata& md) const {
  return factory_.SocketDir(md.container_name) + "/egress.sock";
}

std::unique_ptr<SessionEgress> SessionManager::ReopenEgress(const std::string& recorded,
                                                            uint64_t bytes_used,
                                                            Session::Metadata* md,
                                                            RunnerConnection& conn) {
  absl::StatusOr<std::string> policy =
      options_.egress ? options_.egress->Admit(recorded)
                      : absl::FailedPreconditionError("this sandboxd gives sessions no egress");
  absl::StatusOr<std::unique_ptr<SessionEgress>> egress =
      policy.ok() ? OpenEgress(*md, *policy, conn, /*wait=*/false, bytes_used) : policy.status();
  if (egress.ok()) return *std::move(egress);
  md->egress_lost_reason = absl::StrCat("its egress policy (", recorded,
                                        ") was not restored: ", egress.status().message());
  spdlog::warn("session {}: {}", md->id, codemode::LogLongText(md->egress_lost_reason));
  return nullptr;
}

absl::StatusOr<sandbox::v1::Session> SessionManager::SetEgressPolicy(const std::string& id,
                                                                     const std::string& policy,
                                                                     const std::string& owner) {
  absl::StatusOr<std::shared_ptr<Session>> found = FindOwned(id, owner);
  if (!found.ok()) return found.status();
  absl::StatusOr<std::string> canonical =
      options_.egress ? options_.egress->Canonical(policy) : std::string();
  if (!canonical.ok()) return canonical.status();
  if (!options_.egress && !policy.empty()) {
    return absl::FailedPreconditionError("this sandboxd gives sessions no egress");
  }
  if (absl::Status s = (*found)->NarrowEgress(*canonical, canonical->empty()); !s.ok()) return s;
  spdlog::info("session {}: egress policy narrowed to '{}'", id, codemode::LogText(*canonical));
  return Describe(**found);
}

void Session::AttachEgress(std::unique_ptr<SessionEgress> egress) {
  codemode::MutexLock lock(&mu_);
  if (lost_) return;  // it goes when `egress` does, after the lock (it cut nothing)
  egress_ = std::move(egress);
  egress_recorded_bytes_ = egress_->bytes_used();  // a restored count is in the record
  egress_recorded_ms_ = env_->clock->NowMs();
}

uint64_t Session::EgressBytesLocked() const { return egress_ ? egress_->bytes_used() : 0; }

void Session::RecordEgressUse() {
  {
    codemode::MutexLock lock(&mu_);
    if (lost_ || !egress_) return;
    const uint64_t used = egress_->bytes_used();
    const int64_t now = env_->clock->NowMs();
    // A refund (ChargeAll) can take the count below the recorded one for a moment.
    const uint64_t moved = used > egress_recorded_bytes_ ? used - egress_recorded_bytes_
                                                         : egress_recorded_bytes_ - used;
    if (moved == 0 ||
        (moved < kEgressRecordBytes &&
         now - egress_recorded_ms_ < absl::ToInt64Milliseconds(kEgressRecordInterval))) {
      return;
    }
    egress_recorded_bytes_ = used;
    egress_recorded_ms_ = now;
  }
  if (env_->records) SaveRecord();
}

absl::Status Session::NarrowEgress(absl::string_view policy, bool empty) {
  {
    codemode::MutexLock lock(&mu_);
    if (lost_) return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost_reason_));
    if (!egress_) {
      if (empty) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "the session has no egress, and a running session's policy can only be narrowed");
    }
    if (absl::Status s = egress_->Narrow(policy); !s.ok()) return s;
  }
  SaveRecord();
  return absl::OkStatus();
}

}  // namespace sandboxd
