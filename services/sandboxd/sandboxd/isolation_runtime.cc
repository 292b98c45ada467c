#include "sandboxd/isolation_runtime.h"

#include "absl/strings/str_cat.h"

namespace sandboxd {

absl::StatusOr<RuntimeInfo> IsolationRuntime::Probe() {
  std::optional<RuntimeInfo> info;
  if (podman_) {
    absl::StatusOr<RuntimeInfo> p = podman_->Probe();
    if (!p.ok()) return p.status();
    info = *p;
  }
  if (wasm_) {
    absl::StatusOr<RuntimeInfo> w = wasm_->Probe();
    if (!w.ok()) return w.status();
    if (!info) return w;
    info->wasm_version = w->wasm_version;
    info->wasm_layers = w->wasm_layers;
    info->notes.insert(info->notes.end(), w->notes.begin(), w->notes.end());
  }
  if (!info) return absl::FailedPreconditionError("no container runtime is in use");
  return *info;
}

bool IsolationRuntime::IsWasm(const std::string& name) {
  if (!wasm_) return false;
  absl::StatusOr<ContainerStatus> st = wasm_->Inspect(name);
  return st.ok() && st->exists;
}

absl::StatusOr<std::string> IsolationRuntime::Start(const ContainerSpec& spec) {
  ContainerRuntime* runtime = spec.isolation == Isolation::kWasm ? wasm_ : podman_;
  if (!runtime) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this daemon does not run isolation ", std::string(IsolationName(spec.isolation))));
  }
  return runtime->Start(spec);
}

RemovalFailures IsolationRuntime::Remove(const std::vector<std::string>& names) {
  std::vector<std::string> wasm_names, podman_names;
  for (const std::string& name : names) {
    (IsWasm(name) ? wasm_names : podman_names).push_back(name);
  }
  RemovalFailures failures;
  if (!wasm_names.empty()) failures = wasm_->Remove(wasm_names);
  if (podman_ && !podman_names.empty()) failures.merge(podman_->Remove(podman_names));
  return failures;
}

absl::StatusOr<ContainerStatus> IsolationRuntime::Inspect(const std::string& name) {
  if (IsWasm(name)) return wasm_->Inspect(name);
  if (podman_) return podman_->Inspect(name);
  return ContainerStatus{};
}

absl::StatusOr<std::vector<std::string>> IsolationRuntime::ImageOffers(const std::string& reference) {
  return podman_ ? podman_->ImageOffers(reference) : wasm_->ImageOffers(reference);
}

absl::StatusOr<std::vector<ContainerSummary>> IsolationRuntime::List(const std::string& label_key,
                                                                     const std::string& label_value) {
  std::vector<ContainerSummary> out;
  for (ContainerRuntime* runtime : {wasm_, podman_}) {
    if (!runtime) continue;
    absl::StatusOr<std::vector<ContainerSummary>> some = runtime->List(label_key, label_value);
    if (!some.ok()) return some.status();
    out.insert(out.end(), some->begin(), some->end());
  }
  return out;
}

int IsolationRuntime::RemoveStrays(const std::string& label_key, const std::string& label_value) {
  int removed = 0;
  for (ContainerRuntime* runtime : {wasm_, podman_}) {
    if (runtime) removed += runtime->RemoveStrays(label_key, label_value);
  }
  return removed;
}

std::string IsolationRuntime::RunnerToken(const std::string& name) {
  if (IsWasm(name)) return wasm_->RunnerToken(name);
  return podman_ ? podman_->RunnerToken(name) : "";
}

void IsolationRuntime::CutOffCalls(absl::Time at) {
  if (podman_) podman_->CutOffCalls(at);
  if (wasm_) wasm_->CutOffCalls(at);
}

void IsolationRuntime::EndCalls() {
  if (podman_) podman_->EndCalls();
  if (wasm_) wasm_->EndCalls();
}

bool IsolationRuntime::calls_cut() {
  return (podman_ && podman_->calls_cut()) || (wasm_ && wasm_->calls_cut());
}

absl::StatusOr<ResourceUsage> IsolationRuntime::Usage(const std::string& name, Isolation isolation) {
  if (isolation == Isolation::kWasm && wasm_) return wasm_->Usage(name, isolation);
  if (podman_) return podman_->Usage(name, isolation);
  return absl::UnimplementedError("no runtime reports this session's usage");
}

}  // namespace sandboxd
