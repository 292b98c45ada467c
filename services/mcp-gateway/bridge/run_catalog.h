// What a run's sandbox learns about the upstream tools: the sandbox.v1 catalog its session
// gets, within sandboxd's limits, and the memory of servers that went down (their tools stay
// callable, so code gets a clear ToolError rather than a NameError). What the model reads
// of them, the run tools' descriptions, is the MCP adapter's (adapter/run_descriptions.h).
//
//   std::vector<UpstreamStatus> view = FitCatalogLimits(memory.View(upstreams->Snapshot()));
//   sandbox::v1::Catalog catalog = BuildCatalog(view, args.servers);
//   if (CatalogKey(catalog) != binding.catalog_key) { /* send it with the run */ }
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "bridge/run_arguments.h"
#include "sandbox/v1/sandbox.pb.h"
#include "upstream/manager.h"

namespace gateway {

// The sandbox.v1 catalog for a run: the connected upstreams that `servers` allows.
sandbox::v1::Catalog BuildCatalog(const std::vector<UpstreamStatus>& upstreams,
                                  const ServerAllowlist& servers);

// Identifies a catalog by what it holds (the SHA-256 of its bytes): a sandbox that was
// last sent the catalog of this key accepts exactly its tools, and needs it not sent again.
std::string CatalogKey(const sandbox::v1::Catalog& catalog);

// `upstreams` with every server that would take a sandbox's catalog past sandboxd's limits
// (codemode::kMaxCatalogTools, kMaxCatalogServers, kMaxCatalogBytes) marked unavailable,
// saying why, and its tools dropped. The connected servers fit smallest first (by tools,
// then bytes, then configuration order), so the one left out is the largest: an upstream
// that lists 10,000 tools costs only itself, never the servers configured after it.
std::vector<UpstreamStatus> FitCatalogLimits(std::vector<UpstreamStatus> upstreams);

// Remembers each server as it was when last connected.
class UpstreamMemory {
 public:
  // `snapshot` with every server that is down now replaced by its last connected state
  // (a dead stdio server is restarted on the next call; others answer with an error).
  // `generation` (nullable) gets the generation the memory is at after this call.
  std::vector<UpstreamStatus> View(const std::vector<UpstreamStatus>& snapshot,
                                   uint64_t* generation = nullptr);
  // Changes with every View() call, the only way the memory changes: while it is the
  // one a View() returned, View() of the same snapshot returns the same view.
  uint64_t generation() const;

 private:
  mutable codemode::Mutex mu_;
  std::map<std::string, UpstreamStatus> last_connected_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gateway
