// IsolationRuntime: one ContainerRuntime over the runtimes of the isolations this daemon
// uses, so that the factory, the pools, records, reclaim and stats stay unaware of them:
// Podman for container and gvisor, WasmRuntime for wasm (docs/wasm-tier.md).
//
//   IsolationRuntime runtime(&podman_or_null, &wasm_or_null);
//   SessionManager manager(options, &runtime, &clock);
//
// Probe succeeds only when every runtime in use probes (each isolation the daemon allows
// must work here, as gVisor's); its RuntimeInfo is Podman's when Podman is in use, with
// the wasm tier's version, layers and notes added. Start and Usage go by the spec's
// isolation; Remove, Inspect and List ask both (names never collide: the wasm runtime
// knows a name, Inspect says it exists, only for a process it started).
#pragma once

#include "sandboxd/container_runtime.h"

namespace sandboxd {

class IsolationRuntime : public ContainerRuntime {
 public:
  // Either may be null (not in use), not both. `wasm` is a WasmRuntime in production.
  IsolationRuntime(ContainerRuntime* podman, ContainerRuntime* wasm) : podman_(podman), wasm_(wasm) {}

  absl::StatusOr<RuntimeInfo> Probe() override;
  absl::StatusOr<std::string> Start(const ContainerSpec& spec) override;
  RemovalFailures Remove(const std::vector<std::string>& names) override;
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) override;
  // Podman's answer when Podman is in use (images are its), the wasm tier's otherwise.
  absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string& reference) override;
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                     const std::string& label_value) override;
  absl::StatusOr<ResourceUsage> Usage(const std::string& name, Isolation isolation) override;
  int RemoveStrays(const std::string& label_key, const std::string& label_value) override;
  std::string RunnerToken(const std::string& name) override;
  void CutOffCalls(absl::Time at) override;
  void EndCalls() override;
  bool calls_cut() override;

 private:
  // Whether `name` is a wasm process's.
  bool IsWasm(const std::string& name);

  ContainerRuntime* const podman_;
  ContainerRuntime* const wasm_;
};

}  // namespace sandboxd
