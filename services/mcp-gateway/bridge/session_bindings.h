// SessionBindings: which sandboxd session serves each (MCP session, name). A binding is
// registered before its sandbox session exists, so concurrent first runs of one MCP session
// cannot create two: the first to take the binding's run lock creates it, the others wait
// and use it. Closing an MCP session deletes its sandbox sessions, including one still
// being created.
//
//
// Sandboxes are capped per MCP session and per credential (the bearer token that session
// authenticated with, summed over all its MCP sessions), and sandboxd's owner of each is
// "mcp:<credential>", so sandboxd's own per-owner cap shares its slots among credentials.
//
//   absl::StatusOr<std::shared_ptr<Binding>> b = bindings.FindOrRegister(mcp, "default", cred);
//   if (!(*b)->LockRun(ctx.cancel)) return absl::CancelledError(...);  // cancelled while queued
//   if (absl::Status s = bindings.Open(**b, mcp, "default", catalog); !s.ok()) return s;
//   sandboxes->Execute((*b)->ref(), ...);
//   (*b)->UnlockRun();
//
// A run that names its sandbox by a handle (handles/sandbox_handle.h) uses the binding of
// that sandbox: an MCP session's binding when one holds it, else a binding adopted for the
// address (Adopt), which belongs to no MCP session: closing sessions does not delete its
// sandbox, sandboxd's idle expiry and per-owner cap end it. Adopted bindings are a cache
// (the catalog the sandbox has, its last walk of out/), at most kMaxAdopted, the least
// recently used dropped first: another replica rebuilds what it needs from the handle.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "bridge/produced_files.h"
#include "bridge/run_approvals.h"
#include "bridge/sandbox_egress.h"
#include "bridge/sandboxes.h"

namespace gateway {

class SessionBindings {
 public:
  struct Binding {
    explicit Binding(std::string credential, std::string runtime = "python")
        : credential(std::move(credential)), runtime(std::move(runtime)) {}
    // Who created it (ToolCallContext::credential); its sandbox's owner is "mcp:<credential>".
    const std::string credential;
    // The language its sandbox runs ("python" or "javascript"; sandboxd's runtime), fixed
    // at registration: a run of the other language is refused before it reaches sandboxd.
    const std::string runtime;
    // One run at a time per binding. Taken only through LockRun/UnlockRun, so that a run
    // queued behind another can give up its place when its caller cancels it.
    codemode::Mutex run_mu;
    // Waits until no other run holds the binding, then takes run_mu and returns true; or
    // returns false (holding nothing) as soon as `cancel` is cancelled, even while the run
    // ahead goes on for minutes: an abandoned request must not keep its thread and
    // arguments until then.
    bool LockRun(const std::shared_ptr<codemode::CancelToken>& cancel)
        ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true, run_mu);
    void UnlockRun() ABSL_UNLOCK_FUNCTION(run_mu);
    // The sandbox session, once Open() has created it.
    SandboxRef ref() {
      codemode::MutexLock lock(&state_mu);
      return ref_;
    }
    // Whether the sandbox session exists (Open() succeeded).
    bool ready() {
      codemode::MutexLock lock(&state_mu);
      return ready_;
    }
    // The last walk of the session's out/, read by resources/list while a run goes on.
    OutListing out_listing() {
      codemode::MutexLock lock(&state_mu);
      return out_listing_;
    }
    void set_out_listing(OutListing listing) {
      codemode::MutexLock lock(&state_mu);
      out_listing_ = std::move(listing);
    }
    // Why the sandbox session was lost, once a run found it lost (and Forget dropped the
    // binding); a run that waited for that one then starts over on a new binding.
    std::string lost_reason() {
      codemode::MutexLock lock(&state_mu);
      return lost_reason_;
    }
    void set_lost_reason(std::string reason) {
      codemode::MutexLock lock(&state_mu);
      lost_reason_ = std::move(reason);
    }
    // Tools approved "for this sandbox" (run_approvals.h).
    const std::shared_ptr<ApprovedTools> approved = std::make_shared<ApprovedTools>();
    // Identifies the catalog the session has (CatalogKey; empty: not known), so a run
    // sends its own only when it differs.
    std::string catalog_key ABSL_GUARDED_BY(run_mu);
    // The runner's fingerprint of out/ (Finished.out_digest) when the last walk of out/
    // was taken; empty: none (workspace_resources.h, Refresh).
    std::string out_digest ABSL_GUARDED_BY(run_mu);

   private:
    friend class SessionBindings;
    // Whose turn it is to run; shared with the cancel callbacks of waiting runs, which may
    // fire after the binding is gone.
    struct Turn {
      codemode::Mutex mu;
      bool busy ABSL_GUARDED_BY(mu) = false;
    };
    const std::shared_ptr<Turn> turn_ = std::make_shared<Turn>();
    codemode::Mutex state_mu;
    SandboxRef ref_ ABSL_GUARDED_BY(state_mu);
    bool ready_ ABSL_GUARDED_BY(state_mu) = false;
    OutListing out_listing_ ABSL_GUARDED_BY(state_mu);
    std::string lost_reason_ ABSL_GUARDED_BY(state_mu);
    bool closed ABSL_GUARDED_BY(state_mu) = false;
  };

  // At most `max_per_mcp_session` names per MCP session, and `max_per_credential`
  // bindings per credential over all of its MCP sessions.
  // With `cap_in_sandboxd`, sandboxd holds each credential to max_per_credential too
  // (RunCodeOptions::cap_credentials_in_sandboxd). Each sandbox is created with its
  // credential's egress policy (egress.Sent).
  SessionBindings(Sandboxes* sandboxes, size_t max_per_mcp_session, size_t max_per_credential,
                  bool cap_in_sandboxd = true, SandboxEgress egress = {});

  // The binding of (mcp_session, name), registered for `credential` and `runtime` (without
  // a sandbox session) when there is none. RESOURCE_EXHAUSTED past max_per_mcp_session or
  // max_per_credential; FAILED_PRECONDITION when the name's binding runs another runtime
  // (names are shared by the languages of an MCP session).
  absl::StatusOr<std::shared_ptr<Binding>> FindOrRegister(const std::string& mcp_session,
                                                          const std::string& name,
                                                          const std::string& credential,
                                                          const std::string& runtime = "python");

  // Registers a new binding under the first name "<prefix><n>" (n = 1, 2, ...) that
  // `mcp_session` does not use, whatever names its client chose itself; the same caps as
  // FindOrRegister. Returns the name and the binding.
  absl::StatusOr<std::pair<std::string, std::shared_ptr<Binding>>> RegisterFresh(
      const std::string& mcp_session, const std::string& prefix, const std::string& credential,
      const std::string& runtime = "python");

  // The binding of (mcp_session, name), or null; never registers one.
  std::shared_ptr<Binding> Find(const std::string& mcp_session, const std::string& name);

  // The bindings of one MCP session, by name.
  std::map<std::string, std::shared_ptr<Binding>> Named(const std::string& mcp_session);

  // The sandboxes of `credential` this process knows (its MCP sessions' and the adopted
  // ones), each once, by address.
  std::vector<SandboxRef> ReadyOf(const std::string& credential);

  // Creates the binding's sandbox session if it has none, with `catalog` (identified by
  // `catalog_key`). FAILED_PRECONDITION when the MCP session was closed meanwhile (the new
  // sandbox session is deleted); sandboxd's error when creation fails. sandboxd holds at
  // most max_per_credential sandboxes of the credential (of every MCP session, replica and
  // stateless request); at that limit it ends the credential's least recently used idle one for the new
  // one when `reclaim_idle`, and refuses it otherwise. The sandbox gets the credential's
  // egress policy; one sandboxd refuses is the error.
  absl::Status Open(Binding& b, const std::string& mcp_session, const std::string& name,
                    const sandbox::v1::Catalog& catalog, const std::string& catalog_key,
                    bool reclaim_idle = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.run_mu);

  // Drops the binding when it is still the one registered (its session was lost), so the
  // next run of that name gets a new sandbox session, and deletes the lost session in
  // sandboxd: a lost session keeps its slot there (--max_sessions, --max_sessions_per_owner)
  // until it is deleted, and sandboxed code can lose its session on purpose.
  void Forget(const std::string& mcp_session, const std::string& name,
              const std::shared_ptr<Binding>& b);

  // Adopted bindings kept (each a few hundred bytes and its last walk of out/).
  // At most --max_out_bytes of out/ listing each (256 KiB): 64 MiB in all, where 4096
  // could hold 1.2 GiB. An MCP session's own bindings are not counted here.
  static constexpr size_t kMaxAdopted = 256;

  // The binding of the sandbox at `ref` (which runs ref.runtime: its handle says so) for
  // `credential`: the MCP session binding that holds it, else an adopted one (ready, its
  // catalog unknown), made when there is none.
  std::shared_ptr<Binding> Adopt(const SandboxRef& ref, const std::string& credential);
  // A new binding of no MCP session (a stateless request's), whose Open() creates a sandbox,
  // then Adopted (kept by its address) by Remember().
  std::shared_ptr<Binding> NewStateless(const std::string& credential,
                                        const std::string& runtime = "python");
  void Remember(const std::shared_ptr<Binding>& b);
  // Drops an adopted binding whose sandbox was lost, deleting it in sandboxd (as Forget).
  void ForgetAdopted(const std::shared_ptr<Binding>& b);

  // The MCP session ended: deletes its sandbox sessions (after KeepSandboxes(), forgets
  // them only).
  void Close(const std::string& mcp_session);
  // From now on Close() and CloseAll() leave the sandboxes in sandboxd: an HTTP gateway
  // that stops (a restart, a rolling update of replicas) leaves each to its handle, which a
  // restarted gateway or another replica with the key opens; sandboxd's idle expiry ends
  // those no one comes back to.
  void KeepSandboxes() { keep_sandboxes_ = true; }
  // Every MCP session (gateway shutdown). Adopted bindings are dropped, their sandboxes
  // kept: a handle reaches them through a restarted gateway or another replica, and
  // sandboxd's idle expiry ends them.
  void CloseAll();

  // Sandboxes this process holds for clients: MCP sessions' bindings and adopted ones.
  size_t size();

 private:
  static std::string Key(const std::string& mcp_session, const std::string& name);
  static std::string AddressKey(const SandboxRef& ref);
  // OK when `mcp_session` and `credential` may have one more binding (the caps).
  absl::Status Room(const std::string& mcp_session, const std::string& credential)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the least recently used adopted bindings past kMaxAdopted.
  void DropLeastRecentlyAdopted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes a sandbox session; `what` names it in the warning if that fails. One sandboxd
  // did not answer is kept and retried (RetryFailedDeletes): it would otherwise keep its
  // slot there until sandboxd's idle TTL (a sandboxd restarting, for one).
  // False when it was kept for a retry.
  bool Delete(const SandboxRef& ref, const char* what);
  // Adds to the deletes kept for a retry, dropping the oldest past kMaxFailedDeletes.
  void Keep(std::deque<SandboxRef> refs);
  // Deletes the sessions whose delete failed for want of sandboxd; run before a session is
  // created, so that a restarted sandboxd gets its slots back before it is asked for one.
  // Stops at the first that fails again (sandboxd still away).
  void RetryFailedDeletes();

  Sandboxes* const sandboxes_;
  const size_t max_per_mcp_session_;
  const size_t max_per_credential_;
  const uint32_t sandboxd_owner_limit_;  // CreateSessionRequest.max_owner_sessions (0: none)
  const SandboxEgress egress_;
  std::atomic<bool> keep_sandboxes_{false};
  codemode::Mutex mu_;
  std::map<std::string, std::shared_ptr<Binding>> bindings_ ABSL_GUARDED_BY(mu_);  // by Key()
  // Adopted bindings by AddressKey(), each with the tick of its last use (LRU).
  struct Adopted {
    std::shared_ptr<Binding> binding;
    uint64_t used = 0;
  };
  std::map<std::string, Adopted> adopted_ ABSL_GUARDED_BY(mu_);
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  // At most kMaxFailedDeletes (the oldest are given up, with a warning).
  std::deque<SandboxRef> failed_deletes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
