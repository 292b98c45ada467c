// A credential's resources without an MCP session. See owned_resources.h.
#include "bridge/owned_resources.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <tuple>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "spdlog/spdlog.h"

namespace gateway {


OwnedResources::OwnedResources(Sandboxes* sandboxes, SessionBindings* bindings, OwnedScope scope,
                               ResourceOptions options, HandleMinter mint)
    : sandboxes_(sandboxes),
      bindings_(bindings),
      scope_(scope),
      options_(options),
      mint_(std::move(mint)) {}

Sandboxes::Owned OwnedResources::Owned(const std::string& credential, absl::Time deadline,
                                       const std::shared_ptr<codemode::CancelToken>& cancel) {
  Sandboxes::Owned owned;
  if (scope_ == OwnedScope::kSandboxd) {
    owned = sandboxes_->ListOwned(absl::StrCat("mcp:", credential), deadline, cancel);
  } else if (scope_ == OwnedScope::kThisProcess) {
    owned.refs = bindings_->ReadyOf(credential);  // no executions: walked every time
  }
  if (owned.executions.size() != owned.refs.size()) owned.executions.clear();
  if (owned.refs.size() > kMaxSandboxes) {
    owned.refs.resize(kMaxSandboxes);
    if (!owned.executions.empty()) owned.executions.resize(kMaxSandboxes);
    owned.complete = false;
  }
  return owned;
}

OwnedWalk OwnedResources::Walk(const std::string& credential,
                               const std::shared_ptr<codemode::CancelToken>& cancel) {
  OwnedWalk walk;
  // The walk's time is bounded as a whole and per sandbox (ResourceOptions::list_timeout).
  const absl::Time list_deadline = absl::Now() + options_.list_timeout;
  Sandboxes::Owned owned = Owned(credential, list_deadline, cancel);
  walk.complete = owned.complete;
  walk.missing = std::move(owned.missing);
  // Sandboxed code answers its own listings: each sandbox is walked on a thread of its own
  // (up to kWalkers at once), so one that stalls costs its own quarter of the list's time,
  // not the time of the sandboxes after it.
  const size_t n = owned.refs.size();
  std::vector<absl::StatusOr<OutListing>> listings(n, absl::DeadlineExceededError("not walked"));
  std::atomic<size_t> next{0};
  auto walker = [&] {
    for (size_t i; (i = next++) < n;) {
      const absl::Time now = absl::Now();
      if ((cancel && cancel->cancelled()) || now >= list_deadline) continue;
      const absl::Time deadline = std::min(list_deadline, now + options_.list_timeout / 4);
      listings[i] = ListOut(*sandboxes_, owned.refs[i], options_.limits, deadline, cancel);
    }
  };
  std::vector<std::thread> walkers;
  for (size_t k = 1; k < std::min(n, kWalkers); ++k) {
    walkers.push_back(codemode::StartThread("resources walk", walker));
  }
  walker();
  for (std::thread& t : walkers) t.join();
  if (cancel && cancel->cancelled()) walk.complete = false;
  size_t stalled = 0;  // sandboxes that did not answer in their time, or were not reached
  size_t failed = 0;   // ... or answered with an error
  for (size_t i = 0; i < n; ++i) {
    if (listings[i].ok()) {
      walk.sandboxes.emplace_back(owned.refs[i], std::move(*listings[i]));
    } else if (absl::IsDeadlineExceeded(listings[i].status())) {
      ++stalled;
    } else if (!absl::IsNotFound(listings[i].status()) && !absl::IsFailedPrecondition(listings[i].status())) {
      // Gone between the two looks is not a gap; anything else is.
      walk.complete = false;
      ++failed;
    }
  }
  walk.not_walked = stalled + failed;
  walk.endpoints_missed = walk.missing.size();
  if (stalled > 0) {
    walk.complete = false;
    walk.missing.push_back(absl::StrCat(stalled, " sandbox(es) not walked within --resources_list_timeout (",
                                        absl::FormatDuration(options_.list_timeout), ")"));
  }
  return walk;
}

absl::StatusOr<FilePage> OwnedResources::List(const std::string& credential, const std::string& cursor,
                                              const std::shared_ptr<codemode::CancelToken>& cancel) {
  // As WorkspaceResources::List: the cursor is the position of the page's first file.
  absl::StatusOr<size_t> start = PageStart(cursor);
  if (!start.ok()) return start.status();
  const size_t from = *start;
  const OwnedWalk walk = Walk(credential, cancel);
  if (cancel && cancel->cancelled()) return absl::CancelledError("the request was cancelled");
  uint64_t dropped = 0;
  if (!walk.complete && incomplete_log_.Allow(absl::Now(), &dropped)) {
    spdlog::warn("resources/list of {}: some of its sandboxes could not be listed{}{}{}", credential,
                 walk.missing.empty() ? "" : "; ", codemode::LogText(absl::StrJoin(walk.missing, "; ")),
                 dropped == 0 ? "" : absl::StrCat(" (", dropped, " more such lines dropped)"));
  }
  const size_t page = std::max<size_t>(options_.list_page_size, 1);
  FilePage out;
  if (!walk.complete) {  // the log names the endpoints; the client is not told where they are
    out.incomplete = absl::StrCat("incomplete: the files of ", walk.not_walked, " sandbox(es) that did not answer in "
                                  "time, and of any on ", walk.endpoints_missed, " host(s) that did not answer, "
                                  "are missing from this list; ask again later");
  }
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
      if (out.files.size() == page) {
        out.next_cursor = std::to_string(from + page);
        return out;
      }
      // The title tells the sandboxes apart without naming their sandboxd sessions.
      out.files.push_back(
          {OutFileUriOfHandle(handle, f.path), absl::StrCat("sandbox ", k + 1, ": out/", f.path), f});
    }
  }
  return out;
}

std::optional<size_t> OwnedResources::Fingerprint(const std::string& credential,
                                                  const std::shared_ptr<codemode::CancelToken>& cancel) {
  // Bounded by the look's cancel (ResourceWatch's look_timeout).
  const Sandboxes::Owned owned = Owned(credential, absl::InfiniteFuture(), cancel);
  if (!owned.complete) return std::nullopt;
  Look before;
  {
    codemode::MutexLock lock(&mu_);
    if (auto it = last_looks_.find(credential); it != last_looks_.end()) before = it->second.second;
  }
  Look now;
  std::vector<std::pair<std::string, size_t>> sandboxes;
  for (size_t i = 0; i < owned.refs.size(); ++i) {
    const SandboxRef& ref = owned.refs[i];
    const std::string key = absl::StrCat(ref.endpoint, "/", ref.session_id);
    auto seen = before.find(key);
    if (!owned.executions.empty() && seen != before.end() && seen->second.executions == owned.executions[i]) {
      now[key] = seen->second;
    } else {
      // Bounded by the look's cancel (ResourceWatch's look_timeout).
      absl::StatusOr<OutListing> listing =
          ListOut(*sandboxes_, ref, options_.limits, absl::InfiniteFuture(), cancel);
      if (absl::IsNotFound(listing.status()) || absl::IsFailedPrecondition(listing.status())) continue;
      if (!listing.ok()) return std::nullopt;  // a gap is no change
      std::vector<std::tuple<std::string, uint64_t, int64_t>> files;
      for (const OutFile& f : listing->files) files.emplace_back(f.path, f.size, f.mtime_ms);
      now[key] = Seen{owned.executions.empty() ? 0 : owned.executions[i], absl::Hash<decltype(files)>{}(files)};
    }
    if (now[key].fingerprint != absl::Hash<std::vector<std::tuple<std::string, uint64_t, int64_t>>>{}({})) {
      sandboxes.emplace_back(key, now[key].fingerprint);  // a sandbox without files lists nothing
    }
  }
  {
    codemode::MutexLock lock(&mu_);
    last_looks_[credential] = {++tick_, std::move(now)};
    if (last_looks_.size() > kMaxRemembered) {
      auto oldest = std::min_element(last_looks_.begin(), last_looks_.end(),
                                     [](const auto& a, const auto& b) { return a.second.first < b.second.first; });
      last_looks_.erase(oldest);
    }
  }
  return absl::Hash<decltype(sandboxes)>{}(sandboxes);
}

}  // namespace gateway
