#include "sandboxd/wasm_workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace {

// Directories deeper than this are not walked (each level holds one open directory).
constexpr int kMaxDepth = 128;

struct Walk {
  uint64_t stop_after = 0;
  WasmWorkspaceUse use;
  bool Done() const { return stop_after != 0 && use.inodes >= stop_after; }
};

// Counts the entries of the directory `fd` (which it closes) and, depth first, of its
// subdirectories: each opened relative to its parent with O_NOFOLLOW, so code renaming a
// directory into a symbolic link while the walk runs cannot lead it out of the workspace.
void WalkDirectory(int fd, int depth, Walk& walk) {
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return;
  }
  while (dirent* e = readdir(dir)) {
    if (walk.Done()) break;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    walk.use.inodes++;
    walk.use.bytes += uint64_t(st.st_blocks) * 512;
    if (!S_ISDIR(st.st_mode)) continue;
    if (depth + 1 >= kMaxDepth) {
      walk.use.too_deep = true;
      continue;
    }
    const int child = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child >= 0) WalkDirectory(child, depth + 1, walk);
  }
  closedir(dir);
}

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
    if (depth + 1 >= kMaxDepth || fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode)) {
      continue;
    }
    fchmodat(dirfd(dir), e->d_name, S_IRWXU, 0);  // a directory (just checked), so no link
    const int child = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child >= 0) OpenUpDirectory(child, depth + 1);
  }
  closedir(dir);
}

std::string MiB(uint64_t bytes) { return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB"); }

}  // namespace

WasmWorkspaceBudget WasmWorkspaceBudgetFor(uint64_t bytes) {
  return {bytes, std::max<uint64_t>(1024, bytes / 4096)};
}

absl::StatusOr<WasmWorkspaceUse> MeasureWasmWorkspace(const std::string& path, bool tmpfs,
                                                      uint64_t stop_after_inodes) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", strerror(errno)));
  }
  if (tmpfs) {
    struct statvfs vfs;
    const int rc = fstatvfs(fd, &vfs);
    close(fd);
    if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot statvfs ", path, ": ", strerror(errno)));
    const uint64_t unit = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
    WasmWorkspaceUse use;
    use.bytes = uint64_t{vfs.f_blocks - std::min(vfs.f_blocks, vfs.f_bfree)} * unit;
    use.inodes = uint64_t{vfs.f_files - std::min(vfs.f_files, vfs.f_ffree)};
    return use;
  }
  Walk walk;
  walk.stop_after = stop_after_inodes;
  walk.use.inodes = 1;
  walk.use.bytes = uint64_t(st.st_blocks) * 512;
  WalkDirectory(fd, 0, walk);
  return walk.use;
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
  if (use.too_deep) {
    return absl::StrCat("the workspace nests directories deeper than ", kMaxDepth,
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
