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
#include "sandboxd/trusted_files.h"

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

// `s` said of the wasm tier.
absl::Status Wasm(const absl::Status& s) {
  return s.ok() ? s : absl::Status(s.code(), absl::StrCat("wasm: ", s.message()));
}

std::string MiB(uint64_t bytes) { return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB"); }

}  // namespace

absl::Status PrepareWasmWorkDir(const std::string& work_dir) {
  // Checked before anything is made or chmodded: through another user's link, a `..` or
  // a directory another user may write, mkdir and chmod would act on what that user picks.
  if (absl::Status s = CheckParentsOthersCannotSwap(work_dir, "--wasm_dir"); !s.ok()) return Wasm(s);
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
  return Wasm(CheckParentsOthersCannotSwap(work_dir, "--wasm_dir"));
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
