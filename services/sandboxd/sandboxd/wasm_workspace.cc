#include "sandboxd/wasm_workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/untrusted_json.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

// Gives this process (the owner) read, write and search on the directory `fd` (which it
// closes) and, depth first, on every directory beneath it, opened as WalkDirectory opens
// them: what code made unwritable (chmod 0500) can then be deleted by a sandboxd that is
// not root and so does not bypass modes.
void OpenUpDirectory(int fd, int depth) {
  if (fchmod(fd, S_IRWXU) != 0 && errno != EPERM) {  // EPERM: not ours (root's sessions)
    close(fd);
    return;
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return;
  }
  while (dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (depth + 1 >= kWasmWorkspaceMaxDepth || fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode)) {
      continue;
    }
    fchmodat(dirfd(dir), e->d_name, S_IRWXU, 0);  // a directory (just checked), so no link
    const int child = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child >= 0) OpenUpDirectory(child, depth + 1);
  }
  closedir(dir);
}

// Every directory above `work_dir` (named by `flag`), from the root down: one that another
// user owns or may write lets that user swap work_dir after the start. A sticky directory (/tmp) may be
// writable by all when what lies in it on the way is root's or ours, which only its owner
// can rename or delete. Parts of work_dir that do not exist yet are taken for ours (we make
// them after the checks), so it runs before anything is made.
absl::Status CheckWorkDirParents(const std::string& work_dir, const char* flag) {
  // The kernel resolves `..` after the symbolic link before it, where the text comparison
  // below drops both: a `.` or `..` would hide a link on the way.
  for (const fs::path& part : fs::path(work_dir)) {
    if (part == "." || part == "..") {
      return absl::UnavailableError(absl::StrCat(
          "wasm: ", flag, " ", work_dir, " has a '", part.string(), "' component: name the directory "
          "without '.' or '..' (after a symbolic link '..' leads to the link target's parent)"));
    }
  }
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(work_dir, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("wasm: cannot resolve ", work_dir, ": ", ec.message()));
  }
  // The checks hold for the directory they looked at only if sessions use that one: a
  // symbolic link on the way (whoever owns it may point it elsewhere later) is refused.
  fs::path given = fs::path(work_dir).lexically_normal();
  if (!given.has_filename()) given = given.parent_path();
  if (real.lexically_normal() != given) {
    return absl::UnavailableError(absl::StrCat(
        "wasm: ", flag, " ", work_dir, " resolves to ", real.string(),
        ": name it without a symbolic link on the way (a link's owner could point "
        "it elsewhere after the start)"));
  }
  std::vector<fs::path> chain = {real};
  while (chain.back().has_relative_path()) chain.push_back(chain.back().parent_path());
  const uid_t us = geteuid();
  for (size_t i = chain.size() - 1; i >= 1; --i) {  // chain[i] is the parent of chain[i - 1]
    struct stat dir, next;
    const bool dir_missing = lstat(chain[i].c_str(), &dir) != 0;
    if (dir_missing && errno == ENOENT) continue;  // ours: made after the checks
    const bool next_missing = !dir_missing && lstat(chain[i - 1].c_str(), &next) != 0;
    if (dir_missing || (next_missing && errno != ENOENT)) {
      return absl::UnavailableError(absl::StrCat("wasm: cannot stat ", chain[dir_missing ? i : i - 1].string(),
                                                 ": ", strerror(errno)));
    }
    const bool next_ok = next_missing || next.st_uid == 0 || next.st_uid == us;
    std::string why;
    if (dir.st_uid != 0 && dir.st_uid != us) {
      why = absl::StrCat("belongs to uid ", dir.st_uid);
    } else if ((dir.st_mode & 022) && !(dir.st_mode & S_ISVTX)) {
      why = absl::StrFormat("is writable by group or others (mode %04o)", dir.st_mode & 07777);
    } else if ((dir.st_mode & 022) && !next_ok) {
      why = absl::StrFormat("is writable by others (mode %04o) and %s in it belongs to uid %d",
                            dir.st_mode & 07777, chain[i - 1].string(), next.st_uid);
    }
    if (!why.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "wasm: ", chain[i].string(), ", a parent of ", flag, " ", work_dir, ", ", why,
          ": a user other than root and uid ", us, " could swap ", flag, " after the start (every "
          "parent must be root's or ours and neither group- nor world-writable, or sticky with "
          "what is in it on the way root's or ours)"));
    }
  }
  return absl::OkStatus();
}

// Why `path` (a file sessions read) is not safe from other users ("" when it is): another
// user's, group- or world-writable, or a symbolic link.
std::string UnsafeEntry(const fs::path& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::StrCat("cannot be read: ", strerror(errno));
  if (S_ISLNK(st.st_mode)) return "is a symbolic link (its owner could point it elsewhere)";
  if (st.st_uid != 0 && st.st_uid != geteuid()) return absl::StrCat("belongs to uid ", st.st_uid);
  if (st.st_mode & 022) return absl::StrFormat("is writable by group or others (mode %04o)", st.st_mode & 07777);
  return "";
}

std::string MiB(uint64_t bytes) { return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB"); }

}  // namespace

absl::Status PrepareWasmWorkDir(const std::string& work_dir) {
  // Checked before anything is made or chmodded: through another user's link, a `..` or
  // a directory another user may write, mkdir and chmod would act on what that user picks.
  if (absl::Status s = CheckWorkDirParents(work_dir, "--wasm_dir"); !s.ok()) return s;
  for (const char* dir : {"", "/w", "/snapshots"}) {
    std::error_code ec;
    const std::string path = work_dir + dir;
    // Another user's directory (or a symlink) here would hand it every session's files.
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 &&
        (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0)) {
      return absl::UnavailableError(absl::StrCat(
          "wasm: ", path, " must be a directory of ours that no one else may write (--wasm_dir)"));
    }
    fs::create_directories(path, ec);
    // Session uids traverse it to their own workspace and read the snapshot; nobody lists it.
    const int fd = ec ? -1 : open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const bool made = fd >= 0 && fchmod(fd, 0711) == 0;
    const int error = errno;
    if (fd >= 0) close(fd);
    if (!made) {
      return absl::UnavailableError(absl::StrCat("wasm: cannot prepare ", path, ": ",
                                                 ec ? ec.message() : strerror(error)));
    }
  }
  // Again, now that every part exists (a directory made under an odd umask is others' to write).
  return CheckWorkDirParents(work_dir, "--wasm_dir");
}

absl::Status CheckWasmSessionFiles(const std::string& dir, const char* flag,
                                   const std::vector<std::string>& required) {
  const auto refuse = [&](const std::string& what, const std::string& why) {
    return absl::UnavailableError(absl::StrCat("wasm: ", what, " (", flag, ") ", why,
                                               "; scripts/setup.sh installs it"));
  };
  if (dir.empty() || dir[0] != '/') return refuse(absl::StrCat("'", dir, "'"), "is not an absolute path");
  if (!codemode::IsValidUtf8(dir) ||
      std::any_of(dir.begin(), dir.end(), [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; })) {
    return refuse(absl::StrCat("'", absl::CEscape(dir), "'"), "is not valid UTF-8 or holds a control character");
  }
  if (absl::Status s = CheckWorkDirParents(dir, flag); !s.ok()) return s;
  for (const std::string& name : required) {
    std::error_code ec;
    if (!fs::exists(fs::path(dir) / name, ec)) return refuse(dir, absl::StrCat("lacks ", name));
  }
  const std::string why = UnsafeEntry(dir);
  if (!why.empty()) return refuse(dir, why + ": another user could change what sessions run");
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(dir, ec);
  if (fs::is_regular_file(status)) return absl::OkStatus();  // a file: itself and its parents
  if (!fs::is_directory(status)) return refuse(dir, "is neither a regular file nor a directory");
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = UnsafeEntry(it->path());
    if (!entry.empty()) return refuse(it->path().string(), entry + ": another user could change what sessions run");
  }
  if (ec) return refuse(dir, absl::StrCat("cannot be read: ", ec.message()));
  return absl::OkStatus();
}

WasmWorkspaceBudget WasmWorkspaceBudgetFor(uint64_t bytes) {
  return {bytes, std::max<uint64_t>(1024, bytes / 4096)};
}

int OpenWasmWorkspaceDirectory(int parent, const char* name) {
  const int path_fd = openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return -1;
  struct stat st;
  if (fstat(path_fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & S_IRWXU) != S_IRWXU) {
    chmod(absl::StrCat("/proc/self/fd/", path_fd).c_str(), (st.st_mode & 07777) | S_IRWXU);
  }
  // O_NOATIME: a listing that moved the directory's access time would tell code watching
  // it when the walk reads it. The owner and CAP_FOWNER may ask for it; others read plainly.
  int fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int error = errno;
  close(path_fd);
  errno = error;
  return fd;
}

absl::StatusOr<WasmWorkspaceUse> MeasureWasmTmpfsWorkspace(const std::string& path,
                                                           const std::string& host_path) {
  // O_PATH: fstat, fstatfs and fstatvfs need no permission on the directory itself, whose
  // mode is the session's to set (chmod 0300 would lock out a sandboxd that is not root).
  const int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  struct stat st, host;
  struct statfs fs_type;
  struct statvfs vfs;
  const bool read = fstat(fd, &st) == 0 && fstatfs(fd, &fs_type) == 0 && fstatvfs(fd, &vfs) == 0;
  const int error = errno;
  close(fd);
  if (!read) return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", strerror(error)));
  const bool host_dir = stat(host_path.c_str(), &host) == 0 && host.st_dev == st.st_dev;
  if (fs_type.f_type != TMPFS_MAGIC || host_dir) {
    return absl::UnavailableError(absl::StrCat(path, " is not the sandbox's tmpfs (yet)"));
  }
  const uint64_t unit = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
  WasmWorkspaceUse use;
  use.bytes = uint64_t{vfs.f_blocks - std::min(vfs.f_blocks, vfs.f_bfree)} * unit;
  use.inodes = uint64_t{vfs.f_files - std::min(vfs.f_files, vfs.f_ffree)};
  return use;
}

absl::Time NextWasmWorkspaceWalk(absl::Time start, absl::Duration took,
                                 std::optional<absl::Time> unmeasured_since, absl::Duration bound) {
  const absl::Time paced = start + 10 * took;
  return unmeasured_since ? std::min(paced, *unmeasured_since + bound) : paced;
}

std::string OverWasmWorkspaceBudget(const WasmWorkspaceUse& use, const WasmWorkspaceBudget& budget) {
  if (budget.bytes != 0 && use.bytes > budget.bytes) {
    return absl::StrCat("the workspace holds ", MiB(use.bytes), ", over its budget of ", MiB(budget.bytes),
                        " (limits.workspace_bytes)");
  }
  if (budget.inodes != 0 && use.inodes > budget.inodes) {
    return absl::StrCat("the workspace holds at least ", use.inodes, " files and directories, over its budget of ",
                        budget.inodes, " (one per 4 KiB of limits.workspace_bytes)");
  }
  if (!use.hidden.empty()) {
    return absl::StrCat("the workspace holds ", use.hidden, ", which its budget cannot measure");
  }
  if (use.too_deep) {
    return absl::StrCat("the workspace nests directories deeper than ", kWasmWorkspaceMaxDepth,
                        " levels, past what its budget can measure");
  }
  return "";
}

std::error_code RemoveWasmWorkspace(const std::string& path, bool keep_root) {
  std::error_code ec;
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) OpenUpDirectory(fd, 0);
  if (!keep_root) {
    std::filesystem::remove_all(path, ec);
    return ec;
  }
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(path, ec)) {
    std::filesystem::remove_all(e.path(), ec);
    if (ec) return ec;
  }
  return ec;
}

}  // namespace sandboxd
