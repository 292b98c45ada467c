#include "sandboxd/metrics.h"

#include <map>
#include <string>

namespace sandboxd {
namespace {

using codemode::telemetry::LatencyBuckets;

constexpr char kPrefix[] = "codemode_sandboxd_";

std::string Name(const char* suffix) { return std::string(kPrefix) + suffix; }

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

SandboxdMetrics::SandboxdMetrics(bool counting)
    : counting_(counting),
      registry_(std::make_shared<prometheus::Registry>()),
      gauges_(std::make_shared<codemode::telemetry::ScrapeGauges>()) {
  RegisterSessions(*registry_);
  RegisterExecutions(*registry_);
  RegisterContainers(*registry_);
  gauges_->Add(Name("sessions_active"), "Sessions that exist (any state).",
               [this] { return ReadState(&StateSource::sessions_active); });
  gauges_->AddLabelled(Name("pool_ready"), "Warm containers ready for CreateSession, by runtime.",
                       "runtime", [this] { return ReadPools(&StateSource::pool_ready); });
  gauges_->AddLabelled(Name("pool_target"),
                       "Warm containers wanted, by runtime (--pool_size, --js_pool_size; 0 "
                       "while the runtime cannot run here).",
                       "runtime", [this] { return ReadPools(&StateSource::pool_target); });
  gauges_->Add(Name("containers_failing_removal"),
               "Containers of ended sessions whose removal failed, to be removed again.",
               [this] { return ReadState(&StateSource::containers_failing_removal); });
  gauges_->Add(Name("containers_awaiting_removal"),
               "Containers of ended sessions not removed yet (queued, being removed, or "
               "failing); they may still run until then.",
               [this] { return ReadState(&StateSource::containers_awaiting_removal); });
}

void SandboxdMetrics::RegisterSessions(prometheus::Registry& r) {
  auto& created = prometheus::BuildCounter()
                      .Name(Name("sessions_created_total"))
                      .Help("CreateSession calls that succeeded, by where the container came "
                            "from and the session's runtime.")
                      .Register(r);
  auto& create_duration = prometheus::BuildHistogram()
                              .Name(Name("session_create_duration_seconds"))
                              .Help("CreateSession latency of the sessions created, by source "
                                    "and runtime.")
                              .Register(r);
  const char* sources[] = {"pool", "cold"};
  for (size_t i = 0; i < created_.size(); ++i) {
    for (Language language : {Language::kPython, Language::kJavaScript}) {
      const std::map<std::string, std::string> labels = {
          {"source", sources[i]}, {"runtime", std::string(LanguageName(language))}};
      created_[i][LanguageIndex(language)] = &created.Add(labels);
      create_duration_[i][LanguageIndex(language)] = &create_duration.Add(labels, LatencyBuckets());
    }
  }
  create_failures_ = &prometheus::BuildCounter()
                          .Name(Name("session_create_failures_total"))
                          .Help("CreateSession calls that failed after admission (a container "
                                "did not start, no room once it did, its record not written).")
                          .Register(r)
                          .Add({});
  auto& ended = prometheus::BuildCounter()
                    .Name(Name("sessions_ended_total"))
                    .Help("Sessions that went away, by why.")
                    .Register(r);
  const char* reasons[] = {"closed", "idle", "lost", "limit", "shutdown"};
  for (size_t i = 0; i < ended_.size(); ++i) ended_[i] = &ended.Add({{"reason", reasons[i]}});
}

void SandboxdMetrics::RegisterExecutions(prometheus::Registry& r) {
  auto& executions = prometheus::BuildCounter()
                         .Name(Name("executions_total"))
                         .Help("Finished executions by their status; rejected: refused before "
                               "being queued.")
                         .Register(r);
  const char* statuses[] = {"ok", "error", "timeout", "cancelled", "crashed", "rejected"};
  for (size_t i = 0; i < executions_.size(); ++i) {
    executions_[i] = &executions.Add({{"status", statuses[i]}});
  }
  execution_duration_ = &prometheus::BuildHistogram()
                             .Name(Name("execution_duration_seconds"))
                             .Help("Executions from start to finish, queue excluded.")
                             .Register(r)
                             .Add({}, LatencyBuckets());
  queue_wait_ = &prometheus::BuildHistogram()
                     .Name(Name("execution_queue_wait_seconds"))
                     .Help("Executions from Execute to their start.")
                     .Register(r)
                     .Add({}, LatencyBuckets());
  auto& tool_calls = prometheus::BuildCounter()
                         .Name(Name("tool_calls_total"))
                         .Help("Tool calls made by sandboxed code: ok when the caller answered "
                               "with a result; error when it answered with an error or the "
                               "call was refused.")
                         .Register(r);
  tool_calls_ok_ = &tool_calls.Add({{"outcome", "ok"}});
  tool_calls_error_ = &tool_calls.Add({{"outcome", "error"}});
  output_dropped_ = &prometheus::BuildCounter()
                         .Name(Name("output_dropped_bytes_total"))
                         .Help("Output bytes cut by the output cap (--max_output_bytes).")
                         .Register(r)
                         .Add({});
  runner_frames_waited_ =
      &prometheus::BuildCounter()
           .Name(Name("runner_frames_waited_seconds_total"))
           .Help("Time sessions' runner frames waited to be read because they had used their "
                 "share of sandboxd's CPU (--runner_cpu_millis).")
           .Register(r)
           .Add({});
  displays_dropped_ = &prometheus::BuildCounter()
                           .Name(Name("displays_dropped_total"))
                           .Help("Displays dropped by the display cap (--max_display_bytes).")
                           .Register(r)
                           .Add({});
}

void SandboxdMetrics::RegisterContainers(prometheus::Registry& r) {
  auto& ops = prometheus::BuildCounter()
                  .Name(Name("container_operations_total"))
                  .Help("podman commands run, by subcommand and result.")
                  .Register(r);
  auto& op_duration = prometheus::BuildHistogram()
                          .Name(Name("container_operation_duration_seconds"))
                          .Help("podman commands' latency, by subcommand.")
                          .Register(r);
  const char* op_names[] = {"info", "image_exists", "image_inspect", "run", "rm", "inspect", "ps"};
  for (size_t i = 0; i < container_ops_.size(); ++i) {
    container_ops_[i][0] = &ops.Add({{"op", op_names[i]}, {"result", "ok"}});
    container_ops_[i][1] = &ops.Add({{"op", op_names[i]}, {"result", "error"}});
    container_op_duration_[i] = &op_duration.Add({{"op", op_names[i]}}, LatencyBuckets());
  }
  auto& files = prometheus::BuildCounter()
                    .Name(Name("file_transfer_bytes_total"))
                    .Help("Workspace bytes moved by UploadFile and DownloadFile.")
                    .Register(r);
  file_bytes_[static_cast<size_t>(Direction::kUpload)] = &files.Add({{"direction", "upload"}});
  file_bytes_[static_cast<size_t>(Direction::kDownload)] = &files.Add({{"direction", "download"}});
  auto& egress = prometheus::BuildCounter()
                     .Name(Name("egress_connections_total"))
                     .Help("Egress proxy connections by outcome: allowed (counted when they "
                           "end) or refused (docs/egress.md).")
                     .Register(r);
  egress_allowed_ = &egress.Add({{"outcome", "allowed"}});
  egress_refused_ = &egress.Add({{"outcome", "refused"}});
  auto& egress_bytes = prometheus::BuildCounter()
                           .Name(Name("egress_bytes_total"))
                           .Help("Bytes the egress proxy relayed: up (from the sandbox) and "
                                 "down (to it).")
                           .Register(r);
  egress_bytes_up_ = &egress_bytes.Add({{"direction", "up"}});
  egress_bytes_down_ = &egress_bytes.Add({{"direction", "down"}});
}

void SandboxdMetrics::EgressDecision(bool allowed, uint64_t up, uint64_t down) {
  if (!counting_) return;
  (allowed ? egress_allowed_ : egress_refused_)->Increment();
  if (up > 0) egress_bytes_up_->Increment(static_cast<double>(up));
  if (down > 0) egress_bytes_down_->Increment(static_cast<double>(down));
}

void SandboxdMetrics::SetStateSource(StateSource* source) {
  codemode::MutexLock lock(&source_mu_);
  source_ = source;
}

void SandboxdMetrics::ClearStateSource(StateSource* source) {
  codemode::MutexLock lock(&source_mu_);
  if (source_ == source) source_ = nullptr;
}

double SandboxdMetrics::ReadState(size_t (StateSource::*read)()) {
  codemode::MutexLock lock(&source_mu_);
  return source_ ? static_cast<double>((source_->*read)()) : 0;
}

codemode::telemetry::ScrapeGauges::Samples SandboxdMetrics::ReadPools(
    size_t (StateSource::*read)(Language)) {
  codemode::MutexLock lock(&source_mu_);
  codemode::telemetry::ScrapeGauges::Samples samples;
  for (Language language : {Language::kPython, Language::kJavaScript}) {
    const double value = source_ ? static_cast<double>((source_->*read)(language)) : 0;
    samples.emplace_back(std::string(LanguageName(language)), value);
  }
  return samples;
}

void SandboxdMetrics::SessionCreated(Source source, Language language, absl::Duration took) {
  if (!counting_) return;
  const size_t i = static_cast<size_t>(source), l = LanguageIndex(language);
  created_[i][l]->Increment();
  create_duration_[i][l]->Observe(Seconds(took));
}

void SandboxdMetrics::SessionsEnded(EndReason reason, size_t n) {
  if (!counting_) return;
  if (n > 0) ended_[static_cast<size_t>(reason)]->Increment(static_cast<double>(n));
}

void SandboxdMetrics::ExecutionFinished(sandbox::v1::Finished::Status status, bool started,
                                        absl::Duration ran) {
  if (!counting_) return;
  using sandbox::v1::Finished;
  switch (status) {
    case Finished::OK: executions_[kOk]->Increment(); break;
    case Finished::TIMEOUT: executions_[kTimeout]->Increment(); break;
    case Finished::CANCELLED: executions_[kCancelled]->Increment(); break;
    case Finished::SESSION_LOST: executions_[kCrashed]->Increment(); break;
    default: executions_[kError]->Increment(); break;  // ERROR (nothing else is sent)
  }
  if (started) execution_duration_->Observe(Seconds(ran));
}

void SandboxdMetrics::QueueWaited(absl::Duration waited) {
  if (!counting_) return;
  queue_wait_->Observe(Seconds(waited));
}

void SandboxdMetrics::OutputDropped(uint64_t bytes) {
  if (!counting_) return;
  if (bytes > 0) output_dropped_->Increment(static_cast<double>(bytes));
}

void SandboxdMetrics::RunnerFramesWaited(absl::Duration waited) {
  if (!counting_) return;
  runner_frames_waited_->Increment(absl::ToDoubleSeconds(waited));
}

void SandboxdMetrics::DisplaysDropped(uint64_t n) {
  if (!counting_) return;
  if (n > 0) displays_dropped_->Increment(static_cast<double>(n));
}

void SandboxdMetrics::ContainerOpDone(ContainerOp op, bool ok, absl::Duration took) {
  if (!counting_) return;
  const size_t i = static_cast<size_t>(op);
  container_ops_[i][ok ? 0 : 1]->Increment();
  container_op_duration_[i]->Observe(Seconds(took));
}

void SandboxdMetrics::FileBytes(Direction direction, uint64_t bytes) {
  if (!counting_) return;
  if (bytes > 0) file_bytes_[static_cast<size_t>(direction)]->Increment(static_cast<double>(bytes));
}

}  // namespace sandboxd
