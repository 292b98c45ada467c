// The run_python and run_javascript descriptions the model reads: how code calls the
// upstream tools, then the connected servers and their tools at the richest level of detail
// that fits the bound. They name what the sandbox defines, by the shared catalog rules
// (catalog/catalog.h) over the catalog the run core builds (bridge/run_catalog.h).
//
//   std::string description = DescribeRunJavaScript(upstreams, /*max_bytes=*/8192, "pypi.org");
#pragma once

#include <string>
#include <vector>

#include "upstream/manager.h"

namespace gateway {

// What the code may reach, in both descriptions: with an `egress` policy (its text, as
// sent to sandboxd or as sandboxd shows it), one sentence naming its entries (at most
// kMaxDescribedEntries, then how many more) and how the language's HTTP clients reach them;
// without one (or one of comments alone), "no network".
inline constexpr size_t kMaxDescribedEntries = 20;

// The run_python tool description: the calling convention, then the servers and tools at
// the richest of three levels of detail that fits in `max_bytes`.
std::string DescribeRunPython(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes,
                              const std::string& egress = "");

// The run_javascript tool description: the calling convention, then every connected
// server's tools as TypeScript declarations (catalog/typescript.h) with JSDoc, without
// it, as method names or as counts: the richest level that fits in `max_bytes`.
std::string DescribeRunJavaScript(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes,
                                  const std::string& egress = "");

}  // namespace gateway
