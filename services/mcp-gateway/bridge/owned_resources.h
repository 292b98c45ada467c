// OwnedResources: the MCP resources of a stateless request (protocol 2026-07-28), which has
// no MCP session. Such a request belongs to a credential, not to a session, so its
// resources/list shows the files under /workspace/out/ of every sandbox that credential
// holds, wherever they were made (any replica, stateless or not), each named by a URI of its
// sandbox's handle:
//
//   sandbox://handle/<handle>/out/report.csv
//
// Which sandboxes a credential holds is asked of sandboxd (ListSessions by the owner
// "mcp:<credential>"), where the credential names one client (a bearer token). Where it
// does not, the answer would show one client's files to another: every stdio gateway
// process is "stdio", so a stdio gateway lists the sandboxes it made itself; every
// --no_auth client is "anonymous", so an unauthenticated gateway lists none.
//
//   OwnedResources owned(&sandboxes, &bindings, OwnedScope::kSandboxd, options, mint);
//   absl::StatusOr<FilePage> page = owned.List("token 3f2a9c01b7e4", cursor, cancel);
//   std::optional<size_t> now = owned.Fingerprint("token 3f2a9c01b7e4", cancel);  // ResourceWatch
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "bridge/produced_files.h"
#include "bridge/sandboxes.h"
#include "bridge/session_bindings.h"
#include "bridge/workspace_resources.h"

namespace gateway {

// Whose sandboxes a credential's listing shows (see above).
enum class OwnedScope {
  kSandboxd,     // every sandbox sandboxd holds for the credential
  kThisProcess,  // the sandboxes this process made or opened for it
  kNone,         // none
};

// One look at a credential's sandboxes and their out/ walks, in a stable order.
struct OwnedWalk {
  std::vector<std::pair<SandboxRef, OutListing>> sandboxes;
  // An endpoint or a walk did not answer: some files may be missing.
  bool complete = true;
  std::vector<std::string> missing;  // the endpoints that did not answer, and why
  size_t endpoints_missed = 0;       // how many endpoints did not answer
  size_t not_walked = 0;             // sandboxes not walked in their time, or failing
};

class OwnedResources {
 public:
  // The handle of a sandbox for a credential (RunService::handles).
  using HandleMinter = std::function<std::string(const SandboxRef& ref, const std::string& credential)>;

  // At most this many sandboxes are walked per look (sandboxd caps each owner well below).
  static constexpr size_t kMaxSandboxes = 64;
  // Sandboxes walked at once by one look.
  static constexpr size_t kWalkers = 8;

  OwnedResources(Sandboxes* sandboxes, SessionBindings* bindings, OwnedScope scope,
                 ResourceOptions options, HandleMinter mint);

  OwnedWalk Walk(const std::string& credential, const std::shared_ptr<codemode::CancelToken>& cancel);

  // The credential's files from `cursor` ("" for the first page, else the next_cursor of
  // an earlier page: INVALID_ARGUMENT when it is not one), each by its sandbox's handle.
  // CANCELLED once `cancel` is.
  absl::StatusOr<FilePage> List(const std::string& credential, const std::string& cursor,
                                      const std::shared_ptr<codemode::CancelToken>& cancel);

  // What the credential's list is now, as a number that changes when it does (a file
  // added, removed or rewritten, a sandbox made or ended); nullopt when the look was not
  // complete, so a passing outage does not read as a change. A sandbox whose finished
  // executions (sandboxd's count) are what they were at the last look is not walked again
  // (an idle listener must not re-read every out/ each interval): what code
  // left running in the background writes is seen after the sandbox's next run.
  std::optional<size_t> Fingerprint(const std::string& credential,
                                    const std::shared_ptr<codemode::CancelToken>& cancel);

  // Credentials whose last look is kept for Fingerprint (the oldest go first).
  static constexpr size_t kMaxRemembered = 1024;

 private:
  // The sandboxes of the credential, by scope.
  Sandboxes::Owned Owned(const std::string& credential, absl::Time deadline,
                         const std::shared_ptr<codemode::CancelToken>& cancel);
  // A sandbox's files at its last look: its executions then, and their fingerprint.
  struct Seen {
    uint64_t executions = 0;
    size_t fingerprint = 0;
  };
  using Look = std::map<std::string, Seen>;  // by endpoint and session id
  Sandboxes* const sandboxes_;
  SessionBindings* const bindings_;
  const OwnedScope scope_;
  const ResourceOptions options_;
  const HandleMinter mint_;
  // A listing that missed a host is logged naming it; a client asking again and again while
  // a host is down makes a line a second at most (bursts of ten), not one per request.
  codemode::LogRateLimit incomplete_log_{1, 10};
  codemode::Mutex mu_;
  std::map<std::string, std::pair<uint64_t, Look>> last_looks_ ABSL_GUARDED_BY(mu_);  // by credential: tick, look
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gateway
