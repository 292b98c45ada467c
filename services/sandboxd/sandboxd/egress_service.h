// What sessions need of egress by policy (docs/egress.md), behind a seam so that the
// session code needs no proxy: the daemon's EgressHub (egress_hub.h) implements it over
// sandboxd_egress; unit tests use a fake. Policies cross it as text in canonical form.
//
//   absl::StatusOr<std::string> policy = service->Admit(request.egress_policy());
//   if (!policy->empty()) {
//     auto listener = conn->TurnEgressOn(timeout, /*ask_listener=*/true);
//     auto egress = service->Open(id, owner, *policy, socket_dir + "/egress.sock",
//                                 *std::move(listener), /*bytes_used=*/0);
//   }
//   (*egress)->Narrow("pypi.org");   // PERMISSION_DENIED when wider than the one in force
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/process.h"  // UniqueFd

namespace sandboxd {

// One session's way out: serves its relay while it exists; destroying it cuts every
// connection it has open.
class SessionEgress {
 public:
  virtual ~SessionEgress() = default;
  // Replaces the policy with `policy` when it lies within the one in force.
  virtual absl::Status Narrow(absl::string_view policy) = 0;
  virtual std::string policy() const = 0;  // canonical
  // The bytes the session's quota has counted, those restored by Open included.
  virtual uint64_t bytes_used() const = 0;
};

class EgressService {
 public:
  virtual ~EgressService() = default;
  // The canonical policy of a session that asks for `requested` (the operator's default
  // when empty): INVALID_ARGUMENT naming the entry that does not parse, PERMISSION_DENIED
  // naming the first entry wider than the operator's maximum.
  virtual absl::StatusOr<std::string> Admit(absl::string_view requested) const = 0;
  // `policy` parsed and put in canonical form, with no maximum (INVALID_ARGUMENT).
  virtual absl::StatusOr<std::string> Canonical(absl::string_view policy) const = 0;
  // Serves the session with `policy` (canonical, admitted): accepts on `listener`, the
  // loopback listener its runner handed over, or (none) dials the relay listening at
  // `relay_socket`. INVALID_ARGUMENT when `listener` is not a listening TCP socket.
  // `bytes_used`: what the session's byte quota had counted before (its record's count
  // after a restart; 0 for a new session), counted again in its quota and its owner's.
  virtual absl::StatusOr<std::unique_ptr<SessionEgress>> Open(const std::string& session,
                                                              const std::string& owner,
                                                              const std::string& policy,
                                                              const std::string& relay_socket,
                                                              codemode::UniqueFd listener,
                                                              uint64_t bytes_used) = 0;
  virtual std::string default_policy() const = 0;
  virtual std::string max_policy() const = 0;
};

}  // namespace sandboxd
