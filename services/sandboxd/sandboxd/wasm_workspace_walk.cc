// MeasureWasmWorkspace (wasm_workspace.h): the walk that measures a workspace that is a
// directory on the host, and the re-check passes that make it count what code moves
// behind it (docs/wasm-tier.md, "Disk").
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sandboxd/wasm_workspace.h"

namespace sandboxd {
namespace {

// Walks of a workspace that code changes under them before the measure gives up (UNAVAILABLE).
constexpr int kWalks = 3;
// Re-check passes of a walk (each stats every directory) before its changes count as churn.
constexpr int kSweeps = 3;
// A getdents64 buffer with less room left than this may have stopped short of the end.
constexpr size_t kRoomForAnEntry = sizeof(struct dirent64) + 256;

std::function<void(int)>& ListedHook() {
  static std::function<void(int)> hook;
  return hook;
}

using Key = std::pair<dev_t, ino_t>;
Key KeyOf(const struct stat& st) { return {st.st_dev, st.st_ino}; }

// One name of a directory's listing: its inode and, for a subdirectory, its name.
struct Entry {
  Key key;
  std::string subdir;  // "" for what is not a directory
};

// A directory as of its latest listing.
struct Dir {
  struct timespec mtime = {}, ctime = {};
  // Whether any later change moves mtime or ctime: a change within the clock tick of the
  // change before the listing may leave both as they were (the kernel stamps coarse ticks).
  bool settled = false;
  uint64_t order = 0;  // the walk's listings up to this one
  // Every name of the listing stat'ed and every subdirectory visited: a name gone or
  // swapped since leaves the listing short of what the directory held.
  bool complete = true;
  bool has_subdirs = false;
  std::vector<Entry> entries;
};

// The first pass lists every directory; a sweep stats them and collects what changed since
// its listing; a relist pass lists again what changed (and what is new) and no other.
enum class Pass { kFirst, kSweep, kRelist };

struct Walk {
  uint64_t stop_after = 0;
  // The filesystem keeps a directory's st_nlink at 2 + its subdirectories (ext4, xfs, tmpfs).
  bool counts_subdirs = false;
  Pass pass = Pass::kFirst;
  // Why this walk's count cannot be trusted ("" while it can): what changed kept changing.
  std::string churn;
  bool over = false;  // a directory holds more names than stop_after
  std::vector<char> buffer = std::vector<char>(256 << 10);  // getdents64's, shared by every directory
  WasmWorkspaceUse use;  // the first pass's running count; hidden and too_deep of every pass
  uint64_t root_bytes = 0;
  std::map<Key, Dir> dirs;
  std::map<Key, uint64_t> bytes;  // of every inode the walk has stat'ed, as of its latest stat
  uint64_t listings = 0;
  bool relisted = false;  // a relist pass ran: the first pass's count is not the latest listings'
  struct timespec unsettled_until = {};  // the latest mtime or ctime of a listing not settled
  std::vector<Key> changed;  // a sweep's: directories changed since their latest listing
  std::set<Key> visited;     // this pass's
  bool Done() const {
    return !churn.empty() || over || (stop_after != 0 && use.inodes >= stop_after);
  }
};

// The names in a directory, as of one instant.
struct Listing {
  std::vector<std::string> names;
  uint64_t subdirs = 0;     // entries of type DT_DIR
  bool types_known = true;  // no entry of type DT_UNKNOWN
};

// Reads every name in the directory `fd` into `*out` before the walk visits any: the kernel
// holds a directory's lock through one getdents64 call, so a buffer that takes them all
// (grown until it does) sees them as of one instant. False when the walk is done (also when
// the names reach what is left of stop_after: the first pass's count, or stop_after itself).
bool ListDirectory(int fd, Walk& walk, Listing* out) {
  const uint64_t room = walk.stop_after == 0 ? 0
                        : walk.pass == Pass::kFirst ? walk.stop_after - walk.use.inodes
                                                    : walk.stop_after;
  const size_t most = room == 0 ? size_t{1} << 30 : (room + 1) * sizeof(struct dirent64);
  ssize_t n = 0;
  for (;;) {
    if (lseek(fd, 0, SEEK_SET) != 0 || (n = getdents64(fd, walk.buffer.data(), walk.buffer.size())) < 0) {
      walk.use.hidden = "a directory sandboxd cannot read";
      return false;
    }
    if (walk.buffer.size() - size_t(n) >= kRoomForAnEntry || walk.buffer.size() >= most) break;
    walk.buffer.resize(std::max(walk.buffer.size(), std::min(walk.buffer.size() * 4, most)));
  }
  *out = Listing();
  do {  // a filesystem that answers in parts: the rest, as the kernel gives it
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(walk.buffer.data() + at);
      at += e->d_reclen;
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      if (room != 0 && out->names.size() + 1 >= room) {
        walk.over = true;  // over the inode budget: what the names hold does not matter
        return false;
      }
      out->names.push_back(e->d_name);
      out->subdirs += e->d_type == DT_DIR;
      out->types_known = out->types_known && e->d_type != DT_UNKNOWN;
    }
  } while ((n = getdents64(fd, walk.buffer.data(), walk.buffer.size())) > 0);
  if (ListedHook()) ListedHook()(fd);
  return true;
}

bool Same(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}
bool Before(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

// What the walk listed of `key` may no longer be what it holds (code can rename what the
// walk listed to where it has looked already, so a name gone is not taken for a name
// deleted): the directory is listed again before the walk is done.
void Unsettle(Walk& walk, const Key& key) {
  walk.dirs[key].settled = false;
  walk.dirs[key].complete = false;
  if (walk.pass == Pass::kSweep) walk.changed.push_back(key);
}

bool VisitDirectory(int fd, int depth, const Key* expected, Walk& walk);

// Whether the subdirectory `name` of `fd` is the listed `key`, unchanged since its listing
// and with no subdirectory: then a pass has nothing to do in it but this fstatat.
bool UnchangedLeaf(int fd, const std::string& name, const Key& key, Walk& walk) {
  const auto known = walk.dirs.find(key);
  struct stat st;
  return known != walk.dirs.end() && known->second.settled && !known->second.has_subdirs &&
         fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && KeyOf(st) == key &&
         Same(known->second.mtime, st.st_mtim) && Same(known->second.ctime, st.st_ctim) &&
         walk.visited.insert(key).second;
}

// Opens the subdirectory `name` of `fd` (the directory `parent`) and visits it; what cannot
// be opened, or is not `expected` (when given), unsettles the parent.
void VisitSubdirectory(int fd, const Key& parent, const std::string& name, const Key* expected, int depth,
                       Walk& walk) {
  if (depth + 1 >= kWasmWorkspaceMaxDepth) {
    walk.use.too_deep = true;
    return;
  }
  if (expected != nullptr && UnchangedLeaf(fd, name, *expected, walk)) return;
  const int child = OpenWasmWorkspaceDirectory(fd, name.c_str());
  if (child >= 0 ? !VisitDirectory(child, depth + 1, expected, walk)
                 : errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
    Unsettle(walk, parent);  // moved or swapped since the listing
  } else if (child < 0) {
    walk.use.hidden = "a directory sandboxd cannot read";
  }
}

// Lists the directory `fd` (`st`, stat'ed before the listing at the coarse time `now`),
// records the listing, stats each name (counting, in the first pass, each inode once: a hard
// link is one inode) and visits the subdirectories, depth first.
void ListAndVisit(int fd, const struct stat& st, const struct timespec& now, int depth, Walk& walk) {
  Listing listing;
  if (walk.Done() || !ListDirectory(fd, walk, &listing)) return;
  const Key key = KeyOf(st);
  Dir& dir = walk.dirs[key];
  dir = Dir();
  dir.mtime = st.st_mtim;
  dir.ctime = st.st_ctim;
  const struct timespec& last = Before(st.st_mtim, st.st_ctim) ? st.st_ctim : st.st_mtim;
  dir.settled = Before(last, now);
  if (!dir.settled && Before(walk.unsettled_until, last)) walk.unsettled_until = last;
  dir.order = ++walk.listings;
  for (size_t i = 0; i < listing.names.size() && !walk.Done(); ++i) {
    const std::string& name = listing.names[i];
    struct stat entry;
    if (fstatat(fd, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        Unsettle(walk, key);  // gone since the listing
      } else {
        walk.use.hidden = "a name sandboxd cannot stat";
      }
      continue;
    }
    const uint64_t bytes = uint64_t(entry.st_blocks) * 512;
    const auto [at, first] = walk.bytes.insert({KeyOf(entry), bytes});
    at->second = bytes;
    if (first && walk.pass == Pass::kFirst) {
      walk.use.inodes++;
      walk.use.bytes += bytes;
    }
    const bool subdir = S_ISDIR(entry.st_mode);
    dir.entries.push_back({KeyOf(entry), subdir ? name : std::string()});
    dir.has_subdirs = dir.has_subdirs || subdir;
    if (subdir) VisitSubdirectory(fd, key, name, nullptr, depth, walk);
  }
  // A subdirectory moved here from where the walk has not looked yet, or moved away to
  // where it has looked, shows in the link count (ext4 gives up counting past 65,000, at 1;
  // a directory removed since the listing has none left, and its parent changed).
  struct stat now_st;
  if (!walk.Done() && walk.counts_subdirs && listing.types_known && fstat(fd, &now_st) == 0) {
    if (now_st.st_nlink == 0) {
      Unsettle(walk, key);
    } else if (now_st.st_nlink < 2) {
      walk.use.hidden = "a directory with more subdirectories than its filesystem counts";
    } else if (now_st.st_nlink - 2 != listing.subdirs) {
      Unsettle(walk, key);  // gained or lost a subdirectory since the listing
    }
  }
}

// Passes the directory `key`, unchanged since its latest listing, through to its
// subdirectories as listed.
void VisitListedSubdirectories(int fd, const Key& key, int depth, Walk& walk) {
  const std::vector<Entry> entries = walk.dirs[key].entries;  // visits may list it again
  for (const Entry& e : entries) {
    if (!e.subdir.empty() && !walk.Done()) VisitSubdirectory(fd, key, e.subdir, &e.key, depth, walk);
  }
}

// Visits the directory `fd` (which it closes) in the walk's pass: a directory the walk has not listed, or that changed since its latest
// listing, is listed (sweeps only note it); one unchanged since is passed through to its
// subdirectories as listed. False when it is not `expected` (when given): the inode its
// parent's latest listing names.
bool VisitDirectory(int fd, int depth, const Key* expected, Walk& walk) {
  struct timespec now;
  struct stat st;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  const bool stated = fstat(fd, &st) == 0;
  const bool as_listed = !stated || expected == nullptr || KeyOf(st) == *expected;
  if (!stated) {
    walk.use.hidden = "a directory sandboxd cannot stat";
  } else if (as_listed && walk.visited.insert(KeyOf(st)).second) {
    if (depth == 0) walk.root_bytes = uint64_t(st.st_blocks) * 512;
    const auto known = walk.dirs.find(KeyOf(st));
    const bool changed = known == walk.dirs.end() || !known->second.settled ||
                         !Same(known->second.mtime, st.st_mtim) || !Same(known->second.ctime, st.st_ctim);
    if (walk.pass == Pass::kSweep && changed) walk.changed.push_back(KeyOf(st));
    if (walk.pass != Pass::kSweep && changed) {
      ListAndVisit(fd, st, now, depth, walk);
    } else if (known != walk.dirs.end()) {
      VisitListedSubdirectories(fd, known->first, depth, walk);
    }
  }
  close(fd);
  return as_listed;
}

// What the latest listings hold, from the root down, each inode once.
void CountListings(const Key& root, Walk& walk) {
  walk.use.inodes = 1;
  walk.use.bytes = walk.root_bytes;
  std::set<Key> counted = {root};
  std::vector<Key> todo = {root};
  while (!todo.empty()) {
    const auto dir = walk.dirs.find(todo.back());
    todo.pop_back();
    if (dir == walk.dirs.end()) continue;  // too deep, or not readable: said in use
    for (const Entry& e : dir->second.entries) {
      if (!counted.insert(e.key).second) continue;
      walk.use.inodes++;
      walk.use.bytes += walk.bytes[e.key];
      if (!e.subdir.empty()) todo.push_back(e.key);
    }
  }
}

// Adds the regular files on `dev` that the processes `pids` hold open with no name left
// (st_nlink 0), each once: a walk sees names only, and code keeps a removed file's blocks
// for as long as it holds the file open.
void CountUnlinkedOpenFiles(const std::vector<pid_t>& pids, dev_t dev, WasmWorkspaceUse& use) {
  std::set<ino_t> seen;
  for (pid_t pid : pids) {
    const std::string fds = absl::StrCat("/proc/", pid, "/fd");
    DIR* dir = opendir(fds.c_str());
    if (dir == nullptr) {
      if (errno != ENOENT) use.hidden = absl::StrCat("files sandboxd cannot see (", fds, ": ", strerror(errno), ")");
      continue;  // ENOENT: the process has ended
    }
    while (dirent* e = readdir(dir)) {
      struct stat st;
      if (e->d_name[0] == '.' || fstatat(dirfd(dir), e->d_name, &st, 0) != 0) continue;
      if (!S_ISREG(st.st_mode) || st.st_nlink != 0 || st.st_dev != dev || !seen.insert(st.st_ino).second) continue;
      use.inodes++;
      use.bytes += uint64_t(st.st_blocks) * 512;
    }
    closedir(dir);
  }
}

// One pass of `walk` over the workspace `path`; false (errno set) when `path` cannot be opened.
bool RunPass(const std::string& path, Pass pass, Walk& walk) {
  const int root = OpenWasmWorkspaceDirectory(AT_FDCWD, path.c_str());
  if (root < 0) return false;
  walk.pass = pass;
  walk.relisted = walk.relisted || pass == Pass::kRelist;
  walk.visited.clear();
  walk.changed.clear();
  VisitDirectory(root, 0, nullptr, walk);
  return true;
}

// After the first pass: sweeps until one finds no directory changed since its listing, or
// one only, the directory listed last (the listings then hold the workspace as of that
// listing), listing again in between what changed; churn when none does in kSweeps.
bool Settle(const std::string& path, Walk& walk) {
  for (int sweep = 1; sweep <= kSweeps && walk.churn.empty() && !walk.Done(); ++sweep) {
    // A directory listed in the tick of its last change is listed again: not in that tick.
    struct timespec now;
    for (int i = 0; i < 100 && clock_gettime(CLOCK_REALTIME_COARSE, &now) == 0 && !Before(walk.unsettled_until, now);
         ++i) {
      usleep(1000);
    }
    if (!RunPass(path, Pass::kSweep, walk)) return false;
    std::sort(walk.changed.begin(), walk.changed.end());
    walk.changed.erase(std::unique(walk.changed.begin(), walk.changed.end()), walk.changed.end());
    if (walk.changed.empty() ||
        (walk.changed.size() == 1 && walk.dirs.count(walk.changed[0]) != 0 &&
         walk.dirs[walk.changed[0]].order == walk.listings && walk.dirs[walk.changed[0]].complete)) {
      return true;
    }
    if (sweep < kSweeps && !RunPass(path, Pass::kRelist, walk)) return false;
  }
  if (walk.churn.empty() && !walk.Done()) {
    walk.churn = absl::StrCat("directories kept changing through ", kSweeps, " re-checks after the walk");
  }
  return true;
}

}  // namespace

void SetWasmWorkspaceListedHookForTesting(std::function<void(int dir_fd)> hook) { ListedHook() = std::move(hook); }

absl::StatusOr<WasmWorkspaceUse> MeasureWasmWorkspace(const std::string& path, uint64_t stop_after_inodes,
                                                      const std::vector<pid_t>& holders) {
  Walk walk;
  for (int attempt = 1; attempt <= kWalks; ++attempt) {
    const int root = OpenWasmWorkspaceDirectory(AT_FDCWD, path.c_str());
    if (root < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
    struct stat st;
    struct statfs fs_type;
    if (fstat(root, &st) != 0 || fstatfs(root, &fs_type) != 0) {
      const int error = errno;
      close(root);
      return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", strerror(error)));
    }
    walk = Walk();
    walk.stop_after = stop_after_inodes;
    walk.counts_subdirs = fs_type.f_type == EXT4_SUPER_MAGIC || fs_type.f_type == XFS_SUPER_MAGIC ||
                          fs_type.f_type == TMPFS_MAGIC;
    walk.use.inodes = 1;
    VisitDirectory(root, 0, nullptr, walk);
    walk.use.bytes += walk.root_bytes;
    if (walk.over || (walk.stop_after != 0 && walk.use.inodes >= walk.stop_after)) {
      walk.use.inodes = std::max(walk.use.inodes, walk.stop_after);  // over the inode budget
      return walk.use;
    }
    if (!walk.churn.empty()) continue;
    if (!Settle(path, walk)) {
      return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
    }
    if (walk.over) {
      walk.use.inodes = std::max(walk.use.inodes, walk.stop_after);
      return walk.use;
    }
    if (walk.churn.empty()) {
      if (walk.relisted) CountListings(KeyOf(st), walk);
      CountUnlinkedOpenFiles(holders, st.st_dev, walk.use);
      return walk.use;
    }
  }
  // The budget thread ends a session whose workspace stays unmeasured (kUnmeasuredBound).
  return absl::UnavailableError(
      absl::StrCat("the workspace changed under ", kWalks, " walks in a row (", walk.churn, ")"));
}

}  // namespace sandboxd
