#include "sandboxd/uid_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
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

constexpr uint64_t kSetIdCapabilities = (uint64_t{1} << 6) | (uint64_t{1} << 7);  // SETGID, SETUID

// What a /proc status file says of a thread: its ids in the range, whether it may take
// others (CAP_SETUID or CAP_SETGID permitted; not said: yes), and the number of threads of
// its process (0: not said).
struct StatusIds {
  std::vector<uint32_t> ids;
  bool may_take_ids = true;
  long threads = 0;
};

void AddIdsOf(absl::string_view list, uint32_t first, uint32_t count, std::vector<uint32_t>* ids) {
  for (absl::string_view word : absl::StrSplit(list, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    uint64_t id = 0;
    if (absl::SimpleAtoi(word, &id) && id >= first && id < uint64_t{first} + count) {
      ids->push_back(static_cast<uint32_t>(id));
    }
  }
}

void ParseStatus(absl::string_view text, uint32_t first, uint32_t count, StatusIds* out) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "Uid:") || absl::ConsumePrefix(&line, "Gid:") ||
        absl::ConsumePrefix(&line, "Groups:")) {
      AddIdsOf(line, first, count, &out->ids);
    } else if (absl::ConsumePrefix(&line, "Threads:")) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &out->threads)) out->threads = 0;
    } else if (absl::ConsumePrefix(&line, "CapPrm:")) {
      uint64_t caps = 0;
      out->may_take_ids = !absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &caps) ||
                          (caps & kSetIdCapabilities) != 0;
    }
  }
}

// Reads the status file `name` in the directory `dir`; false when there is none (gone).
bool ReadStatus(int dir, const char* name, uint32_t first, uint32_t count, StatusIds* out) {
  const int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (text.empty()) return false;
  ParseStatus(text, first, count, out);
  return true;
}

}  // namespace

// The threads of the process in the directory `process` other than its first (tid `pid`,
// whose ids are the process's status), each read unless `before` knows it.
void ThreadIds::ScanThreads(int process, long pid, const KnownThreads& before,
                            KnownThreads* after, std::set<uint32_t>* busy) const {
  const int fd = openat(process, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* task = fdopendir(fd);
  if (!task) {
    close(fd);
    return;
  }
  while (dirent* t = readdir(task)) {
    long tid = 0;
    struct stat st;
    if (!absl::SimpleAtoi(t->d_name, &tid) || tid <= 0 || tid == pid ||
        fstatat(dirfd(task), t->d_name, &st, 0) != 0) {
      continue;
    }
    auto it = before.find(tid);
    if (it != before.end() && it->second.inode == st.st_ino && it->second.owner == st.st_uid &&
        it->second.group == st.st_gid) {
      busy->insert(it->second.ids.begin(), it->second.ids.end());
      after->emplace(tid, it->second);
      continue;
    }
    StatusIds ids;
    const std::string status = absl::StrCat(t->d_name, "/status");
    if (!ReadStatus(dirfd(task), status.c_str(), first_, count_, &ids)) continue;
    busy->insert(ids.ids.begin(), ids.ids.end());
    // Read after the stat: a thread that took the tid in between has another inode.
    if (!ids.may_take_ids) after->emplace(tid, Known{st.st_ino, st.st_uid, st.st_gid, ids.ids});
  }
  closedir(task);
}

std::set<uint32_t> ThreadIds::InUse() {
  KnownThreads before;
  KnownThreads after;
  {
    codemode::MutexLock lock(&mu_);
    before.swap(known_);  // a scan meanwhile reads every thread
  }
  std::set<uint32_t> busy;
  if (DIR* dir = opendir(proc_.c_str())) {
    while (dirent* e = readdir(dir)) {
      long pid = 0;
      if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
      const int process = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (process < 0) continue;
      StatusIds first_thread;
      // A process that exits while being read has no threads left to hide ids in; one of a
      // single thread has the ids of its status (a thread it starts later starts with them).
      if (ReadStatus(process, "status", first_, count_, &first_thread)) {
        busy.insert(first_thread.ids.begin(), first_thread.ids.end());
        if (first_thread.threads != 1) ScanThreads(process, pid, before, &after, &busy);
      }
      close(process);
    }
    closedir(dir);
  }
  codemode::MutexLock lock(&mu_);
  known_.swap(after);
  return busy;
}

std::set<uint32_t> UidsWithProcesses(uint32_t first, uint32_t count, const std::string& proc) {
  return ThreadIds(first, count, proc).InUse();
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
