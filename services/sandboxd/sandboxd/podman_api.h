// PodmanApi: podman's REST service (`podman system service`), started and kept running by
// sandboxd, and the HTTP/1.1 requests sandboxd sends it over its unix socket.
//
// A podman CLI call spends ~30 ms of wall and 20-25 ms of CPU starting the podman binary
// before it does anything; the service pays that once. Containers are the same either way
// (the service runs the same libpod code on the same store); PodmanRuntime uses the service
// to start and remove containers, and the CLI for the rest and whenever the service is not
// up (docs/burst.md).
//
//   PodmanApiOptions o;
//   o.env = env;
//   o.socket_dir = state_dir + "/podman-api";
//   PodmanApi api(o);
//   if (api.Ready()) {
//     absl::StatusOr<PodmanApi::Response> r =
//         api.Post("/v4.0.0/libpod/containers/create", spec.dump());
//   }
//
// The service listens in `socket_dir`, a directory of mode 0700 that the supervisor makes
// (or takes back) before each start: whoever can connect there controls every container.
// A supervising thread starts the service, waits for its socket, and starts it again
// (after 1 s, doubling to 30 s) when it exits; the service dies with sandboxd
// (PR_SET_PDEATHSIG on that thread) and is ended by the destructor. A service that stops
// answering (no answer to a ping while a request waits, no whole answer to a Post within
// the request timeout), that answers what is no HTTP, or whose socket is gone is killed,
// so that the next one takes its place: requests meanwhile fail at once.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandboxd/subprocess.h"

namespace sandboxd {

struct PodmanApiOptions {
  std::string podman = "podman";
  std::vector<std::string> global_args;  // before `system service`, as for every CLI call
  std::vector<std::string> env;          // the service's whole environment (KEY=VALUE)
  std::string socket_dir;                // made mode 0700; holds podman.sock
  // A create, a start or a removal takes ~10-130 ms. A request without an answer for a
  // quarter of this has the service pinged, which gets a quarter of it too: no answer to
  // the ping means the service hangs (stopped, or its process wedged), and it is replaced.
  // podman answers a ping without taking any lock: one stuck on a lock answers pings.
  absl::Duration request_timeout = absl::Seconds(20);
  absl::Duration first_restart = absl::Seconds(1);
  absl::Duration longest_restart = absl::Seconds(30);
  // A stopping daemon's cutoff (subprocess.h): a request still waiting at it ends ABORTED,
  // leaving the service be. Null: only request_timeout ends one. Outlives the PodmanApi.
  const Cutoff* cutoff = nullptr;
  // Asked before each start of the service: not OK, and the service is not started (the
  // programs it would run may have been opened to others). Null: none.
  std::function<absl::Status()> check_programs;
};

class PodmanApi {
 public:
  struct Response {
    int status = 0;    // the HTTP status
    std::string body;  // de-chunked
  };

  // Starts the supervising thread; the service is Ready() some 100-300 ms later.
  explicit PodmanApi(PodmanApiOptions options);
  ~PodmanApi();  // ends the service (SIGTERM, SIGKILL after 5 s) and the thread
  PodmanApi(const PodmanApi&) = delete;
  PodmanApi& operator=(const PodmanApi&) = delete;

  // Whether the service answers now (it has accepted a connection since its last start).
  bool Ready();

  // A request with a JSON body ("" for none); any HTTP status is a Response. UNAVAILABLE
  // when nothing was sent (the service is not ready, or its socket cannot be reached);
  // ABORTED when the request went out but no whole answer came back within the timeout
  // (what it did is unknown). A Post without an answer in time has the service replaced; a
  // late Delete does not: podman can hold one container's removal (waiting on its lock or
  // its runtime) while it serves every other request, and replacing a service that still
  // answers pings would cut the starts under way. A service that answers no ping is hung:
  // the requests after it go to the CLI at once, not a timeout each.
  absl::StatusOr<Response> Post(const std::string& path, const std::string& body);
  absl::StatusOr<Response> Delete(const std::string& path);

  std::string socket_path() const { return options_.socket_dir + "/podman.sock"; }

 private:
  // What a request is, for what its lateness at the deadline means: a start's (replace the
  // service), a removal's (keep it: it answered the ping on the way), or the ping's
  // (replace it; a ping is not pinged while it waits).
  enum class Kind { kStart, kRemoval, kPing };
  absl::StatusOr<Response> Request(const std::string& method, const std::string& path,
                                   const std::string& body, Kind kind);
  // Whether the service answers a ping within a quarter of the request timeout; replaced
  // when it does not.
  bool AnswersPing();
  void Supervise();
  // Starts the service and waits until its socket accepts or it exits; true once ready.
  // `*pid` is the process (-1: none was started, or it has been reaped, its wait status
  // then in `*status`).
  bool StartOnce(pid_t* pid, int* status);
  // Kills a service that no longer answers (the supervisor starts the next) and says why.
  void Replace(absl::string_view why);
  // Sleeps `d` unless stopping; false when stopping.
  bool Rest(absl::Duration d);

  const PodmanApiOptions options_;
  codemode::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;  // the running service, -1 when none
  std::thread thread_;
};

// Parses an HTTP/1.1 response from `raw` with Beast's parser, as Request reads one. `at_end`:
// the server has closed, so a body without length runs to the end; otherwise only a
// response whose end its framing marks (Content-Length, chunked, 204/304) is whole.
// INVALID_ARGUMENT when it is not one (or not whole, or its body is over 4 MiB).
absl::StatusOr<PodmanApi::Response> ParseHttpResponse(const std::string& raw, bool at_end = true);

}  // namespace sandboxd
