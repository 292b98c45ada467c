#include "sandboxd/uid_pool.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace sandboxd {

std::shared_ptr<UidPool::Lease> UidPool::Acquire(const std::set<uint32_t>& busy) {
  codemode::MutexLock lock(&mu_);
  for (uint32_t uid = first_; uid < first_ + count_; ++uid) {
    if (leased_.count(uid) || busy.count(uid)) continue;
    auto lease = std::make_shared<Lease>(shared_from_this(), uid);
    leased_[uid] = lease;
    return lease;
  }
  return nullptr;
}

std::shared_ptr<UidPool::Lease> UidPool::Acquire(const std::set<uint32_t>& busy,
                                                 const std::function<bool(uint32_t)>& named) {
  std::set<uint32_t> skip = busy;
  for (;;) {
    std::shared_ptr<Lease> lease = Acquire(skip);
    if (!lease || !named || !named(lease->uid())) return lease;
    skip.insert(lease->uid());  // dropping the lease gives the uid back at once
  }
}

std::shared_ptr<UidPool::Lease> UidPool::Claim(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  if (auto it = leased_.find(uid); it != leased_.end()) {
    if (auto lease = it->second.lock()) return lease;
  }
  auto lease = std::make_shared<Lease>(shared_from_this(), uid);
  if (uid >= first_ && uid < first_ + count_) leased_[uid] = lease;
  return lease;
}

void UidPool::Release(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  auto it = leased_.find(uid);
  // Only if no newer lease took the uid meanwhile (a Claim after this lease expired).
  if (it != leased_.end() && it->second.expired()) leased_.erase(it);
}

namespace {

// Adds the ids in [first, first + count) of the Uid:, Gid: and Groups: lines of a
// /proc status file to `busy`.
void AddIdsOf(const std::filesystem::path& status, uint32_t first, uint32_t count,
              std::set<uint32_t>* busy) {
  std::ifstream in(status);
  for (std::string line; std::getline(in, line);) {
    size_t tag = 0;
    if (line.rfind("Uid:", 0) == 0 || line.rfind("Gid:", 0) == 0) tag = 4;
    if (line.rfind("Groups:", 0) == 0) tag = 7;
    if (tag == 0) continue;
    std::istringstream ids(line.substr(tag));
    for (uint64_t id; ids >> id;) {
      if (id >= first && id < uint64_t{first} + count) busy->insert(static_cast<uint32_t>(id));
    }
  }
}

}  // namespace

std::set<uint32_t> UidsWithProcesses(uint32_t first, uint32_t count, const std::string& proc) {
  namespace fs = std::filesystem;
  std::set<uint32_t> busy;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(proc, ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid <= 0) continue;
    bool threads = false;
    std::error_code task_ec;
    for (const fs::directory_entry& t : fs::directory_iterator(e.path() / "task", task_ec)) {
      AddIdsOf(t.path() / "status", first, count, &busy);
      threads = true;
    }
    // A process that exits while being read has no threads left to hide ids in.
    if (!threads) AddIdsOf(e.path() / "status", first, count, &busy);
  }
  return busy;
}

namespace {

// Whether getpwuid_r or getgrgid_r (`get`) has an entry for `id`, growing the buffer until
// the entry fits. An error other than "no such entry" (0 with no entry, or one of the
// errnos the man page lists for it) counts as an entry.
template <typename Entry, typename Get>
bool HasEntry(Get get, uint32_t id, const char* what) {
  const long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
  for (;;) {
    Entry entry;
    Entry* found = nullptr;
    const int rc = get(id, &entry, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 24)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (found) return true;
    if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM) return false;
    spdlog::warn("cannot tell whether {} {} exists: {}", what, id, strerror(rc));
    return true;
  }
}

}  // namespace

bool HostNamesId(uint32_t id) {
  return HasEntry<struct passwd>(getpwuid_r, id, "an account with uid") ||
         HasEntry<struct group>(getgrgid_r, id, "a group with gid");
}

bool NamedIds::Named(uint32_t id) {
  const absl::Time now = absl::Now();
  {
    codemode::MutexLock lock(&mu_);
    auto it = named_at_.find(id);
    if (it != named_at_.end() && now - it->second < refresh_) return true;
  }
  const bool named = lookup_(id);
  codemode::MutexLock lock(&mu_);
  if (!named) {
    named_at_.erase(id);
    return false;
  }
  spdlog::warn("id {} has a host account or group, so no session gets it; keep the "
               "--session_uid_range free of accounts",
               id);
  named_at_[id] = now;
  return true;
}

}  // namespace sandboxd
