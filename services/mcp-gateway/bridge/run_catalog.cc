// The per-run catalog and the memory of upstreams that went down. See run_catalog.h.
#include "bridge/run_catalog.h"

#include <openssl/sha.h>

#include <algorithm>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "catalog/catalog.h"
#include "base/utf8.h"

namespace gateway {
namespace {

void AddServer(const UpstreamStatus& s, sandbox::v1::Catalog& catalog) {
  auto* server = catalog.add_servers();
  server->set_name(s.name);
  server->set_description(std::string(codemode::Utf8Prefix(s.instructions, 2000)));  // a proto3 string
  for (const auto& t : s.tools) {
    auto* tool = server->add_tools();
    tool->set_name(t.name);
    tool->set_description(t.description);
    tool->set_input_schema_json(t.input_schema.is_object() ? t.input_schema.dump() : "");
    if (t.output_schema.is_object()) tool->set_output_schema_json(t.output_schema.dump());
  }
}

}  // namespace

sandbox::v1::Catalog BuildCatalog(const std::vector<UpstreamStatus>& upstreams,
                                  const ServerAllowlist& servers) {
  sandbox::v1::Catalog catalog;
  for (const auto& s : upstreams) {
    if (s.connected && servers.Allows(s.name)) AddServer(s, catalog);
  }
  return catalog;
}

std::vector<UpstreamStatus> FitCatalogLimits(std::vector<UpstreamStatus> upstreams) {
  struct Candidate {
    size_t tools, bytes, index;
    bool operator<(const Candidate& o) const {
      return std::tie(tools, bytes, index) < std::tie(o.tools, o.bytes, o.index);
    }
  };
  std::vector<Candidate> order;
  for (size_t i = 0; i < upstreams.size(); ++i) {
    if (!upstreams[i].connected) continue;
    sandbox::v1::Catalog one;
    AddServer(upstreams[i], one);
    order.push_back({upstreams[i].tools.size(), one.ByteSizeLong(), i});
  }
  std::sort(order.begin(), order.end());
  size_t servers = 0, tools = 0, bytes = 0;
  for (const Candidate& c : order) {
    if (servers + 1 <= codemode::kMaxCatalogServers && tools + c.tools <= codemode::kMaxCatalogTools &&
        bytes + c.bytes <= codemode::kMaxCatalogBytes) {
      ++servers;
      tools += c.tools;
      bytes += c.bytes;
      continue;
    }
    UpstreamStatus& s = upstreams[c.index];
    s.connected = false;
    s.error = absl::StrCat("left out of sandboxes: its ", c.tools, " tools (", c.bytes,
                           " bytes) would take a sandbox's catalog past its limits (",
                           codemode::kMaxCatalogTools, " tools, ", codemode::kMaxCatalogServers,
                           " servers, ", codemode::kMaxCatalogBytes >> 20,
                           " MiB); the smaller servers fit");
    s.tools.clear();
  }
  return upstreams;
}

std::vector<UpstreamStatus> UpstreamMemory::View(const std::vector<UpstreamStatus>& snapshot,
                                                 uint64_t* generation) {
  std::vector<UpstreamStatus> view;
  codemode::MutexLock lock(&mu_);
  ++generation_;
  if (generation) *generation = generation_;
  for (const auto& s : snapshot) {
    if (s.connected) {
      last_connected_[s.name] = s;
      view.push_back(s);
    } else if (auto it = last_connected_.find(s.name); it != last_connected_.end()) {
      view.push_back(it->second);  // keeps `connected` from when it was up
    } else {
      view.push_back(s);
    }
  }
  return view;
}

uint64_t UpstreamMemory::generation() const {
  codemode::MutexLock lock(&mu_);
  return generation_;
}

std::string CatalogKey(const sandbox::v1::Catalog& catalog) {
  const std::string bytes = catalog.SerializeAsString();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

}  // namespace gateway
