// A credential's resources without an MCP session. See owned_resources.h.
#include "bridge/owned_resources.h"

#include <algorithm>
#include <tuple>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

OwnedResources::OwnedResources(Sandboxes* sandboxes, SessionBindings* bindings, OwnedScope scope,
                               ResourceOptions options, HandleMinter mint)
    : sandboxes_(sandboxes),
      bindings_(bindings),
      scope_(scope),
      options_(options),
      mint_(std::move(mint)) {}

OwnedWalk OwnedResources::Walk(const std::string& credential,
                               const std::shared_ptr<codemode::CancelToken>& cancel) {
  OwnedWalk walk;
  std::vector<SandboxRef> refs;
  if (scope_ == OwnedScope::kSandboxd) {
    Sandboxes::Owned owned = sandboxes_->ListOwned(absl::StrCat("mcp:", credential), cancel);
    refs = std::move(owned.refs);
    walk.complete = owned.complete;
  } else if (scope_ == OwnedScope::kThisProcess) {
    refs = bindings_->ReadyOf(credential);
  }
  if (refs.size() > kMaxSandboxes) {
    refs.resize(kMaxSandboxes);
    walk.complete = false;
  }
  for (const SandboxRef& ref : refs) {
    if (cancel && cancel->cancelled()) {
      walk.complete = false;
      break;
    }
    absl::StatusOr<OutListing> listing = ListOut(*sandboxes_, ref, options_.limits, cancel);
    if (listing.ok()) {
      walk.sandboxes.emplace_back(ref, std::move(*listing));
    } else if (!absl::IsNotFound(listing.status()) && !absl::IsFailedPrecondition(listing.status())) {
      // Gone between the two looks is not a gap; anything else is.
      walk.complete = false;
    }
  }
  return walk;
}

absl::StatusOr<json> OwnedResources::List(const std::string& credential, const std::string& cursor,
                                          const std::shared_ptr<codemode::CancelToken>& cancel) {
  // As WorkspaceResources::List: the cursor is the position of the page's first resource.
  size_t from = 0;
  if (!cursor.empty() && (cursor.size() > 20 || !absl::SimpleAtoi(cursor, &from))) {
    return absl::InvalidArgumentError("params.cursor is not a cursor of this server");
  }
  const OwnedWalk walk = Walk(credential, cancel);
  if (cancel && cancel->cancelled()) return absl::CancelledError("the request was cancelled");
  if (!walk.complete) {
    spdlog::warn("resources/list of {}: some of its sandboxes could not be listed", credential);
  }
  const size_t page = std::max<size_t>(options_.list_page_size, 1);
  json resources = json::array();
  size_t index = 0;
  for (size_t k = 0; k < walk.sandboxes.size(); ++k) {
    const auto& [ref, listing] = walk.sandboxes[k];
    if (index + listing.files.size() <= from) {  // a whole earlier page
      index += listing.files.size();
      continue;
    }
    const std::string handle = mint_(ref, credential);
    for (const OutFile& f : listing.files) {
      if (index++ < from) continue;
      if (resources.size() == page) {
        return json{{"resources", std::move(resources)}, {"nextCursor", std::to_string(from + page)}};
      }
      // The title tells the sandboxes apart without naming their sandboxd sessions.
      resources.push_back(WorkspaceResources::DescribeFile(
          OutFileUriOfHandle(handle, f.path), absl::StrCat("sandbox ", k + 1, ": out/", f.path), f));
    }
  }
  return json{{"resources", std::move(resources)}};
}

std::optional<size_t> OwnedResources::Fingerprint(const std::string& credential,
                                                  const std::shared_ptr<codemode::CancelToken>& cancel) {
  const OwnedWalk walk = Walk(credential, cancel);
  if (!walk.complete) return std::nullopt;
  std::vector<std::tuple<size_t, std::string, std::string, uint64_t, int64_t>> files;
  for (const auto& [ref, listing] : walk.sandboxes) {
    for (const OutFile& f : listing.files) {
      files.emplace_back(ref.endpoint, ref.session_id, f.path, f.size, f.mtime_ms);
    }
  }
  return absl::Hash<decltype(files)>{}(files);
}

}  // namespace gateway
