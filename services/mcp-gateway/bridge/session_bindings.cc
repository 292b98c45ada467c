// Sandbox sessions per (MCP session, name). See session_bindings.h.
#include "bridge/session_bindings.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// Separates the MCP session key from the name; neither can contain it (names are
// [A-Za-z0-9_-], session keys are printable).
constexpr char kSeparator = '\x1f';
// Failed deletes kept for a retry (SessionBindings::Delete); each is a few dozen bytes.
constexpr size_t kMaxFailedDeletes = 1024;

bool BelongsTo(const std::string& key, const std::string& mcp_session) {
  return key.size() > mcp_session.size() && key.compare(0, mcp_session.size(), mcp_session) == 0 &&
         key[mcp_session.size()] == kSeparator;
}

// sandboxd's refusal of the egress policy the operator set (a parse error or one wider
// than its --egress_max, naming the entry; no egress there at all): said to be the
// operator's setting, since nothing the caller passes changes it. Other errors as they are.
absl::Status EgressRefusal(const absl::Status& s, const std::string& egress) {
  if (egress.empty() || !absl::StrContains(s.message(), "egress")) return s;
  return absl::Status(s.code(), absl::StrCat(
      "sandboxd refused the egress policy this gateway sets for your credential's sandboxes "
      "(the operator's --sandbox_egress or --credential_settings); nothing ran: ", s.message()));
}

}  // namespace

bool SessionBindings::Binding::LockRun(const std::shared_ptr<codemode::CancelToken>& cancel) {
  // What a queued run waits for: its turn, or its caller giving up.
  struct Wait {
    Turn* turn;
    codemode::CancelToken* cancel;
    bool Over() const ABSL_NO_THREAD_SAFETY_ANALYSIS {  // evaluated with turn->mu held
      return !turn->busy || (cancel != nullptr && cancel->cancelled());
    }
  } wait{turn_.get(), cancel.get()};
  if (cancel != nullptr) {
    // The token changes outside turn->mu: taking and releasing the lock after it changed
    // makes the releasing thread evaluate the waiters' conditions again.
    cancel->OnCancel([turn = turn_] { codemode::MutexLock touch(&turn->mu); });
  }
  {
    codemode::MutexLock lock(&turn_->mu);
    turn_->mu.Await(absl::Condition(&wait, &Wait::Over));
    // Cancelled while another run held the binding (or before asking): nothing runs.
    if (turn_->busy || (cancel != nullptr && cancel->cancelled())) return false;
    turn_->busy = true;
  }
  run_mu.Lock();  // free: only the holder of the turn takes it
  return true;
}

void SessionBindings::Binding::UnlockRun() {
  run_mu.Unlock();
  codemode::MutexLock lock(&turn_->mu);
  turn_->busy = false;
}

SessionBindings::SessionBindings(Sandboxes* sandboxes, size_t max_per_mcp_session,
                                 size_t max_per_credential, bool cap_in_sandboxd, SandboxEgress egress)
    : sandboxes_(sandboxes),
      max_per_mcp_session_(max_per_mcp_session),
      max_per_credential_(max_per_credential),
      sandboxd_owner_limit_(cap_in_sandboxd ? static_cast<uint32_t>(std::min<size_t>(
                                                  max_per_credential, UINT32_MAX))
                                            : 0),
      egress_(std::move(egress)) {}

std::string SessionBindings::Key(const std::string& mcp_session, const std::string& name) {
  return absl::StrCat(mcp_session, std::string(1, kSeparator), name);
}

absl::StatusOr<std::shared_ptr<SessionBindings::Binding>> SessionBindings::FindOrRegister(
    const std::string& mcp_session, const std::string& name, const std::string& credential,
    const std::string& runtime) {
  const std::string key = Key(mcp_session, name);
  codemode::MutexLock lock(&mu_);
  if (auto it = bindings_.find(key); it != bindings_.end()) {
    if (it->second->runtime == runtime) return it->second;
    return absl::FailedPreconditionError(absl::StrCat(
        "the session '", name, "' of this client runs ", it->second->runtime, ", not ", runtime,
        ": use run_", it->second->runtime, " for it, or give this run another `session` name"));
  }
  if (absl::Status room = Room(mcp_session, credential); !room.ok()) return room;
  auto b = std::make_shared<Binding>(credential, runtime);
  bindings_[key] = b;
  return b;
}

absl::StatusOr<std::pair<std::string, std::shared_ptr<SessionBindings::Binding>>>
SessionBindings::RegisterFresh(const std::string& mcp_session, const std::string& prefix,
                               const std::string& credential, const std::string& runtime) {
  codemode::MutexLock lock(&mu_);
  if (absl::Status room = Room(mcp_session, credential); !room.ok()) return room;
  // Within max_per_mcp_session names, one of the first max_per_mcp_session + 1 is free.
  for (size_t n = 1;; ++n) {
    std::string name = absl::StrCat(prefix, n);
    auto [it, added] = bindings_.try_emplace(Key(mcp_session, name));
    if (!added) continue;
    it->second = std::make_shared<Binding>(credential, runtime);
    return std::make_pair(std::move(name), it->second);
  }
}

absl::Status SessionBindings::Room(const std::string& mcp_session, const std::string& credential) {
  size_t named = 0, credentials = 0;
  for (const auto& [k, b] : bindings_) {
    named += BelongsTo(k, mcp_session);
    credentials += b->credential == credential;
  }
  if (named >= max_per_mcp_session_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this client already has ", named, " sandbox sessions (the limit)"));
  }
  // One credential opening many MCP sessions must not take every sandbox: sandboxd's
  // slots are shared by every client.
  if (credentials >= max_per_credential_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this credential already has ", credentials, " sandbox sessions over all its MCP "
        "sessions (--max_sandboxes_per_credential); end some MCP sessions first"));
  }
  return absl::OkStatus();
}

std::string SessionBindings::AddressKey(const SandboxRef& ref) {
  return absl::StrCat(ref.endpoint, std::string(1, kSeparator), ref.session_id);
}

std::shared_ptr<SessionBindings::Binding> SessionBindings::Adopt(const SandboxRef& ref,
                                                                const std::string& credential) {
  const std::string& runtime = ref.runtime;
  codemode::MutexLock lock(&mu_);
  for (const auto& [key, b] : bindings_) {
    codemode::MutexLock state(&b->state_mu);
    if (b->ready_ && b->ref_ == ref && b->credential == credential && b->runtime == runtime) return b;
  }
  Adopted& a = adopted_[AddressKey(ref)];
  a.used = ++tick_;
  if (a.binding && a.binding->credential == credential && a.binding->runtime == runtime) return a.binding;
  a.binding = std::make_shared<Binding>(credential, runtime);
  {
    codemode::MutexLock state(&a.binding->state_mu);
    a.binding->ref_ = ref;
    a.binding->ready_ = true;
  }
  std::shared_ptr<Binding> adopted = a.binding;
  DropLeastRecentlyAdopted();
  return adopted;
}

std::shared_ptr<SessionBindings::Binding> SessionBindings::NewStateless(const std::string& credential,
                                                                       const std::string& runtime) {
  return std::make_shared<Binding>(credential, runtime);
}

void SessionBindings::Remember(const std::shared_ptr<Binding>& b) {
  const SandboxRef ref = b->ref();
  codemode::MutexLock lock(&mu_);
  adopted_[AddressKey(ref)] = Adopted{b, ++tick_};
  DropLeastRecentlyAdopted();
}

void SessionBindings::DropLeastRecentlyAdopted() {
  // A binding in use stays reachable through its users; dropping it only means the next
  // handle run here sends the catalog again.
  while (adopted_.size() > kMaxAdopted) {
    auto oldest = std::min_element(adopted_.begin(), adopted_.end(), [](const auto& x, const auto& y) {
      return x.second.used < y.second.used;
    });
    adopted_.erase(oldest);
  }
}

void SessionBindings::ForgetAdopted(const std::shared_ptr<Binding>& b) {
  const SandboxRef ref = b->ref();
  {
    codemode::MutexLock lock(&mu_);
    auto it = adopted_.find(AddressKey(ref));
    if (it == adopted_.end() || it->second.binding != b) return;
    adopted_.erase(it);
  }
  Delete(ref, "lost sandbox");
}

std::shared_ptr<SessionBindings::Binding> SessionBindings::Find(const std::string& mcp_session,
                                                               const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto it = bindings_.find(Key(mcp_session, name));
  return it == bindings_.end() ? nullptr : it->second;
}

std::map<std::string, std::shared_ptr<SessionBindings::Binding>> SessionBindings::Named(
    const std::string& mcp_session) {
  std::map<std::string, std::shared_ptr<Binding>> named;
  codemode::MutexLock lock(&mu_);
  for (const auto& [key, b] : bindings_) {
    if (BelongsTo(key, mcp_session)) named[key.substr(mcp_session.size() + 1)] = b;
  }
  return named;
}

std::vector<SandboxRef> SessionBindings::ReadyOf(const std::string& credential) {
  std::vector<std::shared_ptr<Binding>> mine;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [key, b] : bindings_) {
      if (b->credential == credential) mine.push_back(b);
    }
    for (const auto& [key, a] : adopted_) {
      if (a.binding->credential == credential) mine.push_back(a.binding);
    }
  }
  std::map<std::string, SandboxRef> refs;  // by address: a binding may be adopted too
  for (const auto& b : mine) {
    if (b->ready()) refs.emplace(AddressKey(b->ref()), b->ref());
  }
  std::vector<SandboxRef> out;
  for (auto& [key, ref] : refs) out.push_back(std::move(ref));
  return out;
}

absl::Status SessionBindings::Open(Binding& b, const std::string& mcp_session,
                                   const std::string& name, const sandbox::v1::Catalog& catalog,
                                   const std::string& catalog_key, bool reclaim_idle) {
  {
    codemode::MutexLock lock(&b.state_mu);
    if (b.ready_) return absl::OkStatus();
  }
  RetryFailedDeletes();
  const std::string& egress = egress_.Sent(b.credential);
  absl::StatusOr<SandboxRef> ref =
      sandboxes_->CreateSession(absl::StrCat("mcp:", b.credential), name, catalog,
                                Sandboxes::Room{sandboxd_owner_limit_, reclaim_idle}, b.runtime, egress);
  if (!ref.ok()) return EgressRefusal(ref.status(), egress);
  {
    codemode::MutexLock lock(&b.state_mu);
    if (!b.closed) {
      b.ref_ = *ref;
      b.ref_.runtime = b.runtime;  // what it was created to run, whatever the seam echoed
      b.catalog_key = catalog_key;
      b.ready_ = true;
      return absl::OkStatus();
    }
  }
  // The MCP session ended while the sandbox session was being created.
  Delete(*ref, "sandbox session");
  return absl::FailedPreconditionError("the MCP session was closed");
}

void SessionBindings::Forget(const std::string& mcp_session, const std::string& name,
                             const std::shared_ptr<Binding>& b) {
  {
    codemode::MutexLock lock(&mu_);
    auto it = bindings_.find(Key(mcp_session, name));
    if (it == bindings_.end() || it->second != b) return;
    bindings_.erase(it);
  }
  if (!b->ready()) return;
  Delete(b->ref(), "lost sandbox session");
}

bool SessionBindings::Delete(const SandboxRef& ref, const char* what) {
  absl::Status s = sandboxes_->DeleteSession(ref);
  if (s.ok() || absl::IsNotFound(s)) return true;
  const bool retry = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
  spdlog::warn("cannot delete {} {}: {}{}", what, codemode::LogText(ref.session_id),
               codemode::LogLongText(s.message()),
               retry ? "; retried before the next sandbox is created" : "");
  if (!retry) return true;
  Keep({ref});
  return false;
}

void SessionBindings::Keep(std::deque<SandboxRef> refs) {
  codemode::MutexLock lock(&mu_);
  for (SandboxRef& ref : refs) {
    if (failed_deletes_.size() >= kMaxFailedDeletes) {
      spdlog::warn("sandbox session {} is not deleted: more than {} deletes wait for "
                   "sandboxd; it ends at sandboxd's --idle_ttl",
                   codemode::LogText(failed_deletes_.front().session_id), kMaxFailedDeletes);
      failed_deletes_.pop_front();
    }
    failed_deletes_.push_back(std::move(ref));
  }
}

void SessionBindings::RetryFailedDeletes() {
  std::deque<SandboxRef> retry;
  {
    codemode::MutexLock lock(&mu_);
    if (failed_deletes_.empty()) return;
    retry.swap(failed_deletes_);  // one caller retries each
  }
  spdlog::info("retrying {} sandbox session delete(s) that failed", retry.size());
  while (!retry.empty()) {
    const SandboxRef ref = std::move(retry.front());
    retry.pop_front();
    // Still unreachable (kept again): the rest wait for the next creation, so a run pays
    // for one failed delete at most, not for every kept one (each can take its deadline).
    if (!Delete(ref, "sandbox session")) break;
  }
  if (!retry.empty()) Keep(std::move(retry));
}

void SessionBindings::Close(const std::string& mcp_session) {
  std::vector<std::shared_ptr<Binding>> doomed;
  {
    codemode::MutexLock lock(&mu_);
    for (auto it = bindings_.begin(); it != bindings_.end();) {
      if (BelongsTo(it->first, mcp_session)) {
        doomed.push_back(it->second);
        it = bindings_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& b : doomed) {
    std::optional<SandboxRef> ref;
    {
      // A binding whose session is still being created deletes it itself (Open).
      codemode::MutexLock lock(&b->state_mu);
      b->closed = true;
      if (b->ready_) ref = b->ref_;
    }
    if (ref && !keep_sandboxes_) Delete(*ref, "sandbox session");
  }
}

size_t SessionBindings::size() {
  codemode::MutexLock lock(&mu_);
  return bindings_.size() + adopted_.size();
}

void SessionBindings::CloseAll() {
  std::vector<std::string> mcp_sessions;
  {
    codemode::MutexLock lock(&mu_);
    adopted_.clear();
    for (const auto& [k, _] : bindings_) mcp_sessions.push_back(k.substr(0, k.find(kSeparator)));
  }
  for (const auto& s : mcp_sessions) Close(s);
}

}  // namespace gateway
