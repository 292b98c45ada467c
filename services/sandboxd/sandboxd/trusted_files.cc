#include "sandboxd/trusted_files.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/process.h"
#include "base/utf8.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

constexpr char kOthersCouldChange[] = ": another user could change what sessions run";

// Why `path` (a file sessions read) is not safe ("" when it is), each reason saying what it
// would allow: another user's, group- or world-writable, a symbolic link, neither a regular
// file nor a directory, or a regular file that runs with more than sandboxd's user's
// privileges (set-user-ID, set-group-ID, file capabilities).
std::string UnsafeEntry(const fs::path& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::StrCat("cannot be read: ", strerror(errno));
  if (S_ISLNK(st.st_mode)) {
    return "is a symbolic link (name the file it leads to: a link can be pointed elsewhere after the start)";
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) return absl::StrCat("belongs to uid ", st.st_uid, kOthersCouldChange);
  if (st.st_mode & 022) {
    return absl::StrFormat("is writable by group or others (mode %04o)%s", st.st_mode & 07777, kOthersCouldChange);
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return "is neither a regular file nor a directory (a FIFO, socket or device gives what its other end says)";
  }
  if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
    return absl::StrFormat("is set-user-ID or set-group-ID (mode %04o): what it runs would not "
                           "run as sandboxd's user", st.st_mode & 07777);
  }
  if (S_ISREG(st.st_mode) && lgetxattr(path.c_str(), "security.capability", nullptr, 0) >= 0) {
    return "has file capabilities (security.capability): what it runs would not run with "
           "sandboxd's privileges";
  }
  return "";
}

// One step of a path: `dir` and `next`, an entry in it (both absolute, without a link, `.`
// or `..` on the way), as CheckParentsOthersCannotSwap describes; `shown` and `flag` name
// the path. Parts that do not exist yet are taken for ours (made after the checks).
absl::Status CheckDirectoryStep(const fs::path& dir, const fs::path& next, const std::string& shown,
                                const char* flag) {
  struct stat d, n;
  const bool dir_missing = lstat(dir.c_str(), &d) != 0;
  if (dir_missing && errno == ENOENT) return absl::OkStatus();
  const bool next_missing = !dir_missing && lstat(next.c_str(), &n) != 0;
  if (dir_missing || (next_missing && errno != ENOENT)) {
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", absl::CEscape((dir_missing ? dir : next).string()), ": ", strerror(errno)));
  }
  const uid_t us = geteuid();
  const bool next_ok = next_missing || n.st_uid == 0 || n.st_uid == us;
  std::string why;
  if (d.st_uid != 0 && d.st_uid != us) {
    why = absl::StrCat("belongs to uid ", d.st_uid);
  } else if ((d.st_mode & 022) && !(d.st_mode & S_ISVTX)) {
    why = absl::StrFormat("is writable by group or others (mode %04o)", d.st_mode & 07777);
  } else if ((d.st_mode & 022) && !next_ok) {
    why = absl::StrFormat("is writable by others (mode %04o) and %s in it belongs to uid %d", d.st_mode & 07777,
                          absl::CEscape(next.string()), n.st_uid);
  }
  if (why.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      absl::CEscape(dir.string()), ", a parent of ", flag, " ", shown, ", ", why, ": ",
      us == 0 ? std::string("a user other than root") : absl::StrCat("a user other than root and uid ", us),
      " could swap ", flag, " after the start (every parent must be root's or ours and neither "
      "group- nor world-writable, or sticky with what is in it on the way root's or ours)"));
}

// Every step from the root down to `real`.
absl::Status CheckDirectoriesAbove(const fs::path& real, const std::string& shown, const char* flag) {
  std::vector<fs::path> chain = {real};
  while (chain.back().has_relative_path()) chain.push_back(chain.back().parent_path());
  for (size_t i = chain.size() - 1; i >= 1; --i) {  // chain[i] is the parent of chain[i - 1]
    if (absl::Status s = CheckDirectoryStep(chain[i], chain[i - 1], shown, flag); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// Every directory above `work_dir` (named by `flag`), from the root down: one that another
// user owns or may write lets that user swap work_dir after the start. A sticky directory (/tmp) may be
// writable by all when what lies in it on the way is root's or ours, which only its owner
// can rename or delete. Parts of work_dir that do not exist yet are taken for ours (we make
// them after the checks), so it runs before anything is made.
absl::Status CheckParentsOthersCannotSwap(const std::string& work_dir, const char* flag) {
  if (!codemode::IsPlainLine(work_dir)) {
    return absl::UnavailableError(absl::StrCat("'", absl::CEscape(work_dir), "' (", flag, ") is not valid UTF-8 or holds ",
                                               codemode::kNotPlainLine));
  }
  // The kernel resolves `..` after the symbolic link before it, where the text comparison
  // below drops both: a `.` or `..` would hide a link on the way.
  for (const fs::path& part : fs::path(work_dir)) {
    if (part == "." || part == "..") {
      return absl::UnavailableError(absl::StrCat(
          flag, " ", work_dir, " has a '", part.string(), "' component: name it without "
          "'.' or '..' (after a symbolic link '..' leads to the link target's parent)"));
    }
  }
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(work_dir, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", work_dir, ": ", ec.message()));
  }
  // The checks hold for the directory they looked at only if sessions use that one: a
  // symbolic link on the way (whoever owns it may point it elsewhere later) is refused.
  fs::path given = fs::path(work_dir).lexically_normal();
  if (!given.has_filename()) given = given.parent_path();
  if (real.lexically_normal() != given) {
    return absl::UnavailableError(absl::StrCat(
        flag, " ", work_dir, " resolves to ", absl::CEscape(real.string()),
        ": name it without a symbolic link on the way (a link can be pointed elsewhere after "
        "the start)"));
  }
  return CheckDirectoriesAbove(real, work_dir, flag);
}

absl::Status CheckFilesOthersCannotChange(const std::string& dir, const char* flag,
                                          const std::vector<std::string>& required) {
  const auto refuse = [&](const std::string& what, const std::string& why) {
    return absl::UnavailableError(absl::StrCat(what, " (", flag, ") ", why));
  };
  const auto missing = [&](const std::string& what, const std::string& why) {
    return absl::UnavailableError(absl::StrCat(what, " (", flag, ") ", why, "; scripts/setup.sh installs it"));
  };
  if (dir.empty() || dir[0] != '/') {
    return refuse(absl::StrCat("'", absl::CEscape(dir), "'"), "is not an absolute path");
  }
  if (absl::Status s = CheckParentsOthersCannotSwap(dir, flag); !s.ok()) return s;  // a plain line, too
  if (struct stat st; lstat(dir.c_str(), &st) != 0) {
    return missing(dir, absl::StrCat("cannot be read: ", strerror(errno)));
  }
  for (const std::string& name : required) {
    std::error_code ec;
    if (!fs::exists(fs::path(dir) / name, ec)) return missing(dir, absl::StrCat("lacks ", name));
  }
  const std::string why = UnsafeEntry(dir);
  if (!why.empty()) return refuse(dir, why);
  std::error_code ec;
  // UnsafeEntry passes regular files and directories only. A file: itself and its parents.
  if (fs::is_regular_file(fs::symlink_status(dir, ec))) return absl::OkStatus();
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = UnsafeEntry(it->path());
    if (!entry.empty()) return refuse(absl::CEscape(it->path().string()), entry);
  }
  if (ec) return refuse(dir, absl::StrCat("cannot be read: ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveOthersCannotChange(const std::string& name, const char* flag) {
  std::string found = name;
  if (name.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    found = codemode::FindInPath(name, path ? path : "");
    // Not found now, it would be looked up again at each use, where a PATH directory
    // another user may write could offer one later.
    if (found.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "no ", absl::CEscape(name), " (", flag, ") in PATH (", absl::CEscape(path ? path : ""),
          "): install it (scripts/setup.sh does) or name it by its absolute path"));
    }
  }
  std::error_code ec;
  const fs::path given = fs::absolute(found, ec).lexically_normal();
  const std::string shown = absl::CEscape(given.string());
  // Both: the name given, and the one used (the working directory before a relative one).
  if (!codemode::IsPlainLine(found) || !codemode::IsPlainLine(given.string())) {
    return absl::UnavailableError(absl::StrCat("'", shown, "' (", flag, ") is not valid UTF-8 or holds ",
                                               codemode::kNotPlainLine));
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", flag, " ", shown, ": ", ec.message()));
  // Walked one name at a time, as the kernel does: every directory entered and every link
  // met is checked where it lies (CheckDirectoriesAbove), and a link is then replaced by
  // its target.
  std::vector<std::string> left;  // the names still to walk, the next one last
  for (const fs::path& part : given.relative_path()) left.push_back(part.string());
  std::reverse(left.begin(), left.end());
  fs::path real = "/";
  for (int links = 0; !left.empty();) {
    const std::string part = left.back();
    left.pop_back();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      real = real.parent_path();
      continue;
    }
    const fs::path next = real / part;  // every step before it checked already
    if (absl::Status s = CheckDirectoryStep(real, next, shown, flag); !s.ok()) return s;
    struct stat st;
    if (lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) {
        return absl::UnavailableError(absl::StrCat(absl::CEscape(next.string()), " (", flag,
                                                   ") cannot be read: ", strerror(errno)));
      }
      // Missing: whoever uses it says so, and only root or we may make it later.
      struct stat dir;
      if (lstat(real.c_str(), &dir) == 0 && S_ISDIR(dir.st_mode) && (dir.st_mode & 022)) {
        return absl::UnavailableError(absl::StrFormat(
            "%s, where %s %s would be, is writable by group or others (mode %04o): another user "
            "could put it there after the start", absl::CEscape(real.string()), flag, shown, dir.st_mode & 07777));
      }
      return given.string();
    }
    if (!S_ISLNK(st.st_mode)) {
      real = next;
      continue;
    }
    if (++links > 40) return absl::UnavailableError(absl::StrCat(flag, " ", shown, ": too many symbolic links"));
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat(absl::CEscape(next.string()), " (", flag, ") cannot be read: ",
                                                 ec.message()));
    }
    if (target.is_absolute()) real = "/";
    std::vector<std::string> parts;
    for (const fs::path& p : target.relative_path()) parts.push_back(p.string());
    left.insert(left.end(), parts.rbegin(), parts.rend());
  }
  absl::Status s = CheckFilesOthersCannotChange(real.string(), flag, {});
  if (!s.ok() && real != given) {
    return absl::UnavailableError(
        absl::StrCat(flag, " ", shown, " resolves to ", absl::CEscape(real.string()), "; ", s.message()));
  }
  if (!s.ok()) return s;
  return given.string();
}

}  // namespace sandboxd
