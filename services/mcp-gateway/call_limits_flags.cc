// The flags of work in flight after dispatch (server/call_limits.h). See call_limits_flags.h.
#include "call_limits_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(uint32_t, max_calls_in_flight, 256,
          "tools/call and resources/read being worked on (each on a thread of its own, holding "
          "its arguments until its response is sent), all sessions together; past it a call "
          "is answered at once with an error naming this flag.");
ABSL_FLAG(uint32_t, max_calls_in_flight_per_credential, 64,
          "As --max_calls_in_flight, for the sessions of one bearer token (stdio: the one client).");
ABSL_FLAG(uint64_t, max_call_bytes_in_flight, 64 << 20,
          "Bytes of arguments held by calls in flight (a run_python waiting for the run ahead "
          "of it, or one a client left), all sessions together; a call past it is refused.");
ABSL_FLAG(uint64_t, max_call_bytes_in_flight_per_credential, 16 << 20,
          "As --max_call_bytes_in_flight, for the sessions of one bearer token.");
ABSL_FLAG(uint32_t, max_resource_reads_in_flight, 4,
          "resources/read being worked on at once, all sessions together: each holds a file of "
          "up to --max_resource_bytes several times over (bytes, base64, JSON) until its "
          "response is queued; past it a read is refused with an error naming this flag.");
ABSL_FLAG(uint32_t, max_resource_reads_in_flight_per_credential, 2,
          "As --max_resource_reads_in_flight, for the sessions of one bearer token.");
ABSL_FLAG(uint32_t, parked_call_threads, 8,
          "Threads that ended a tools/call or resources/read and wait up to a minute for their "
          "MCP session's next call instead of ending, all sessions together (at most one per "
          "session): that call then starts without making a thread. 0: each call makes its "
          "thread.");
ABSL_FLAG(absl::Duration, resource_read_wait, absl::Seconds(30),
          "A resources/read of a bearer token holding none, past --max_resource_reads_in_flight, "
          "waits in line this long for a slot (freed slots go to the line first, in order; one "
          "read per token waits) before it is refused.");

std::shared_ptr<gateway::CallLimits> CallLimitsFromFlags(std::shared_ptr<codemode::BufferCeiling> ceiling) {
  gateway::CallLimits::Options o;
  o.max_calls = absl::GetFlag(FLAGS_max_calls_in_flight);
  o.max_calls_per_credential = absl::GetFlag(FLAGS_max_calls_in_flight_per_credential);
  o.max_bytes = absl::GetFlag(FLAGS_max_call_bytes_in_flight);
  o.max_bytes_per_credential = absl::GetFlag(FLAGS_max_call_bytes_in_flight_per_credential);
  o.max_reads = absl::GetFlag(FLAGS_max_resource_reads_in_flight);
  o.max_reads_per_credential = absl::GetFlag(FLAGS_max_resource_reads_in_flight_per_credential);
  o.read_wait = absl::GetFlag(FLAGS_resource_read_wait);
  return std::make_shared<gateway::CallLimits>(o, std::move(ceiling));
}

std::shared_ptr<codemode::ParkedThreads> ParkedCallThreadsFromFlags() {
  const uint32_t n = absl::GetFlag(FLAGS_parked_call_threads);
  return n == 0 ? nullptr : std::make_shared<codemode::ParkedThreads>(n);
}
