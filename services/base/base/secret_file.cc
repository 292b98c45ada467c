#include "base/secret_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace codemode {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  unsigned char random[32];
  if (bytes > sizeof random ||
      getrandom(random, bytes, 0) != static_cast<ssize_t>(bytes)) {
    return absl::FailedPreconditionError("cannot read random bytes");
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(random), bytes));
}

// Only a regular file of ours that nobody else can read or write holds a secret: a file
// someone else owns or could read authenticates nobody. `fd` is open on `path`.
// `made_here`: a missing file would be created (so deleting it is a way out).
absl::Status CheckPrivate(int fd, const std::string& path, const SecretFileKind& kind, bool made_here) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno(absl::StrCat("cannot stat ", kind.what), path);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kind.what, " ", path, " is not a regular file owned by us"));
  }
  if (st.st_mode & 077) {
    return absl::FailedPreconditionError(absl::StrCat(
        kind.what, " ", path, " can be read or written by other users; run chmod 600 on it",
        made_here ? absl::StrCat(" (or delete it for a new ", kind.secret, ")") : ""));
  }
  return absl::OkStatus();
}

// Reads the secret file `name` in the directory `dirfd` (`path` names it in messages).
absl::StatusOr<std::string> ReadSecretAt(int dirfd, const std::string& name,
                                         const std::string& path, const SecretFileKind& kind) {
  Fd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return Errno(absl::StrCat("cannot open ", kind.what), path);
  if (absl::Status s = CheckPrivate(fd.get(), path, kind, true); !s.ok()) return s;
  char buf[512];
  ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n < 0) return Errno(absl::StrCat("cannot read ", kind.what), path);
  std::string secret(absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
  if (secret.size() < 16) {
    return absl::FailedPreconditionError(absl::StrCat(kind.what, " ", path, " holds no ",
                                                      kind.secret, " of at least 16 characters"));
  }
  return secret;
}

// Creates the missing directories of `dir` with mode 0700 (umask can only take bits away).
// A directory that already exists keeps its mode: --token_file=/tmp/x must not make /tmp
// private.
absl::Status MakeMissingDirectories(const std::string& dir) {
  std::string prefix = dir.front() == '/' ? "" : ".";
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&prefix, "/", part);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("cannot create directory", prefix);
    }
  }
  return absl::OkStatus();
}

// Opens the secret file's directory and checks that nobody else can swap what is in it:
// it is ours or root's, and one others can write must be sticky (/tmp), where others
// cannot rename or remove our files.
absl::StatusOr<int> OpenSecretDirectory(const std::string& dir, const SecretFileKind& kind) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", dir);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = Errno("cannot stat directory", dir);
    close(fd);
    return s;
  }
  std::string problem;
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    problem = absl::StrCat("belongs to uid ", st.st_uid);
  } else if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
    problem = "can be written by other users and is not sticky";
  }
  if (!problem.empty()) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to keep the ", kind.what, " in ", dir, ": the directory ", problem,
        " (so another user could replace the ", kind.what, "); choose another ", kind.flag));
  }
  return fd;
}

// Writes `line` to a new file of a random name in `dirfd` (O_EXCL, O_NOFOLLOW: a name
// someone planted, file or symlink, is never opened), mode 0600. Returns its name.
absl::StatusOr<std::string> WritePrivateTemp(int dirfd, const std::string& base,
                                             const std::string& line, const std::string& dir,
                                             const SecretFileKind& kind) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    absl::StatusOr<std::string> suffix = RandomHex(8);
    if (!suffix.ok()) return suffix.status();
    std::string tmp = absl::StrCat(".", base, ".", *suffix, ".tmp");
    int fd = openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return Errno(absl::StrCat("cannot create a ", kind.what, " in"), dir);
    Fd closer(fd);
    bool ok = fchmod(fd, 0600) == 0 &&
              write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
              fsync(fd) == 0;
    if (!ok) {
      absl::Status s = Errno(absl::StrCat("cannot write ", kind.what), dir + "/" + tmp);
      unlinkat(dirfd, tmp.c_str(), 0);
      return s;
    }
    return tmp;
  }
  return absl::FailedPreconditionError(absl::StrCat("cannot create a ", kind.what, " in ", dir));
}

// What could not be read or made on the way (not a verdict on its safety).
absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

// The parent of a resolved, symlink-free absolute path ("/" for "/").
std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// Whether a directory may be on the way to a private one: root's or ours, and sticky if
// others may write it (/tmp: others cannot rename or remove our entries there).
absl::Status CheckStep(const std::string& path, const struct stat& st) {
  const uid_t me = geteuid();
  if (S_ISLNK(st.st_mode)) {
    if (st.st_uid == me || st.st_uid == 0) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is a symlink of uid ", st.st_uid, ", who could point it elsewhere"));
  }
  if (!S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a directory"));
  if (st.st_uid != me && st.st_uid != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " belongs to uid ", st.st_uid, ", who could replace what is in it"));
  }
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s can be written by other users and is not sticky (mode 0%o)", path, st.st_mode & 07777));
  }
  return absl::OkStatus();
}

// Resolves `dir` as the kernel does, one component at a time from "/" (the working
// directory first for a relative one), and checks everything resolution passes: every
// directory (CheckStep) and every symlink it follows, the directories inside a symlink's
// target included (checking the path as written and realpath()'s result misses another
// user's symlink in the middle of a chain, and a realpath() can fail on a long path). A
// missing directory is created 0700 when `make` says so, and only inside one already
// checked (creating first would follow other users' symlinks); without `make`, what is
// missing and what a ".." leads back out of it to is walked as what would be made, and
// nothing is. `*resolved`: where the walk ends, "" when that is a directory it would make.
// The rule
// is ssh's StrictModes; this is what lets no other user swap the directory or anything on
// the way to it later. FAILED_PRECONDITION names the step that is not safe; other codes,
// what could not be read or made.
absl::Status WalkPrivatePath(const std::string& dir, bool make, std::string* resolved) {
  std::deque<std::string> todo;
  auto push_front = [&todo](absl::string_view path) {
    std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
    todo.insert(todo.begin(), parts.begin(), parts.end());
  };
  push_front(dir);
  if (dir.front() != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == nullptr) return IoError("cannot read the working directory", ".");
    push_front(cwd);
  }
  std::string at = "/";
  struct stat st;
  if (lstat("/", &st) != 0) return IoError("cannot stat", "/");
  if (absl::Status s = CheckStep("/", st); !s.ok()) return s;
  int links = 0;
  int unmade = 0;  // without `make`: how deep the walk is inside directories it would make
  while (!todo.empty()) {
    const std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      if (unmade > 0) {
        --unmade;
      } else {
        at = ParentOf(at);  // checked already: a prefix of `at`
      }
      continue;
    }
    if (unmade > 0) {  // inside a directory that would be made ours, empty
      if (part.size() > NAME_MAX) {
        errno = ENAMETOOLONG;
        return IoError("cannot create directory", part);
      }
      ++unmade;
      continue;
    }
    const std::string next = at == "/" ? "/" + part : at + "/" + part;
    if (lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT) return IoError("cannot stat", next);
      if (!make) {
        // As mkdir would be judged: by the effective uid and its capabilities.
        if (faccessat(AT_FDCWD, at.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
          return IoError("cannot create directory", next);
        }
        ++unmade;
        continue;
      }
      if (mkdir(next.c_str(), 0700) != 0 && errno != EEXIST) return IoError("cannot create directory", next);
      if (lstat(next.c_str(), &st) != 0) return IoError("cannot stat", next);
    }
    if (absl::Status s = CheckStep(next, st); !s.ok()) return s;
    if (!S_ISLNK(st.st_mode)) {
      at = next;
      continue;
    }
    if (++links > 40) return absl::InvalidArgumentError(absl::StrCat(next, ": too many levels of symbolic links"));
    char target[PATH_MAX];
    const ssize_t n = readlink(next.c_str(), target, sizeof target);
    if (n < 0) return IoError("cannot read the symlink", next);
    if (n == 0 || n >= static_cast<ssize_t>(sizeof target)) {
      return absl::InvalidArgumentError(absl::StrCat(next, " is a symlink to an empty or overlong target"));
    }
    if (target[0] == '/') at = "/";
    push_front(absl::string_view(target, static_cast<size_t>(n)));
  }
  *resolved = unmade > 0 ? "" : at;
  return absl::OkStatus();
}

// The walk of `dir` (made or not), then the directory itself: ours and closed to group
// and others; one that is not there yet when nothing is made would be so.
absl::Status CheckPrivateDirectory(const std::string& dir, const std::string& what, const std::string& flag,
                                   bool make) {
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty; set ", flag));
  const std::string elsewhere = absl::StrCat("choose a directory of our own with ", flag);
  std::string resolved;
  if (absl::Status walked = WalkPrivatePath(dir, make, &resolved); !walked.ok()) {
    if (!absl::IsFailedPrecondition(walked)) {
      return absl::FailedPreconditionError(absl::StrCat(what, " ", dir, ": ", walked.message()));
    }
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", dir, " is not safe from other users: ", walked.message(), "; ", elsewhere));
  }
  // Without `make`, where the walk ended: a path through what is still missing
  // ("new/../x") does not resolve yet, though what it leads to is there.
  if (!make && resolved.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(make ? dir.c_str() : resolved.c_str(), &st) != 0) return Errno(absl::StrCat("cannot stat ", what), dir);
  std::string problem;
  if (st.st_uid != geteuid()) {
    problem = absl::StrCat("belongs to uid ", st.st_uid, ", not to us (uid ", geteuid(), "); ", elsewhere);
  } else if ((st.st_mode & 077) != 0) {
    // A sticky or world-writable directory (/tmp) is shared by design: never advise closing it.
    const bool shared = (st.st_mode & (S_ISVTX | S_IWOTH)) != 0;
    problem = absl::StrFormat("can be entered by other users (mode 0%o): %s%s", st.st_mode & 07777,
                              shared ? "it is shared; " : "run chmod 700 on it, or ", elsewhere);
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what, " ", dir, " ", problem));
}

}  // namespace

absl::Status CheckPrivateDirectory(const std::string& dir, const std::string& what, const std::string& flag) {
  return CheckPrivateDirectory(dir, what, flag, /*make=*/false);
}

absl::Status ClaimPrivateDirectory(const std::string& dir, const std::string& what,
                                   const std::string& flag) {
  // Checked whole before anything is made: a refused claim leaves no directory behind.
  if (absl::Status s = CheckPrivateDirectory(dir, what, flag, /*make=*/false); !s.ok()) return s;
  return CheckPrivateDirectory(dir, what, flag, /*make=*/true);
}

std::string DefaultStateDir(const std::string& app) {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && x[0] == '/') {
    return absl::StrCat(x, "/", app);
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/tmp", "/.local/state/", app);
}

std::string DefaultStateFile(const std::string& app, const std::string& name) {
  return absl::StrCat(DefaultStateDir(app), "/", name);
}

absl::StatusOr<std::string> LoadOrCreateSecretFile(const std::string& path, const SecretFileKind& kind) {
  std::filesystem::path p(path);
  const std::string base = p.filename().string();
  std::string dir = p.parent_path().string();
  if (dir.empty()) dir = ".";
  if (base.empty() || base == "." || base == "..") {
    return absl::InvalidArgumentError(absl::StrCat(kind.what, " ", path, " names no file"));
  }
  if (absl::Status made = MakeMissingDirectories(dir); !made.ok()) return made;
  absl::StatusOr<int> dirfd_or = OpenSecretDirectory(dir, kind);
  if (!dirfd_or.ok()) return dirfd_or.status();
  Fd dirfd(*dirfd_or);
  struct stat st;
  if (fstatat(dirfd.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return ReadSecretAt(dirfd.get(), base, path, kind);
  }
  absl::StatusOr<std::string> secret = RandomHex(32);
  if (!secret.ok()) return secret.status();
  // Written whole under a private name, then linked into place: a gateway starting at the
  // same moment either sees no file or a complete one, and the first link wins.
  absl::StatusOr<std::string> tmp = WritePrivateTemp(dirfd.get(), base, *secret + "\n", dir, kind);
  if (!tmp.ok()) return tmp.status();
  int linked = linkat(dirfd.get(), tmp->c_str(), dirfd.get(), base.c_str(), 0);
  int link_errno = errno;
  unlinkat(dirfd.get(), tmp->c_str(), 0);
  if (linked != 0 && link_errno != EEXIST) {
    errno = link_errno;
    return Errno(absl::StrCat("cannot create ", kind.what), path);
  }
  // Whoever placed it (we, or a process starting beside us), the secret is what the file
  // holds once read back under the same checks as at every later start.
  return ReadSecretAt(dirfd.get(), base, path, kind);
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, const SecretFileKind& kind,
                                            size_t max_bytes) {
  Fd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return Errno(absl::StrCat("cannot open ", kind.what), path);
  if (absl::Status s = CheckPrivate(fd.get(), path, kind, false); !s.ok()) return s;
  std::string contents(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < contents.size()) {
    ssize_t n = read(fd.get(), contents.data() + got, contents.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("cannot read ", kind.what), path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(kind.what, " ", path, " is larger than ", max_bytes, " bytes"));
  }
  contents.resize(got);
  return contents;
}

absl::StatusOr<std::string> ReadPrivateKeyFile(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> key = ReadPrivateFile(path, {flag, "private key", flag}, 1 << 20);
  if (key.ok() && key->find("PRIVATE KEY-----") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " holds no PEM private key"));
  }
  return key;
}

absl::StatusOr<std::string> ReadCertificateFile(const std::string& path, const std::string& flag) {
  constexpr size_t kMaxPemBytes = 1 << 20;
  // Public, so a symlink may lead to it (a mounted Kubernetes Secret); but a trust anchor
  // others could rewrite trusts whoever rewrote it, and a FIFO or a device would hang or
  // flood the start.
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return Errno(absl::StrCat("cannot read ", flag), path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno(absl::StrCat("cannot stat ", flag), path);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is not a regular file"));
  if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022)) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", path, " could be rewritten by another user (it must be ours or root's, and not "
        "group- or world-writable)"));
  }
  std::string pem(kMaxPemBytes + 1, '\0');
  size_t got = 0;
  while (got < pem.size()) {
    ssize_t n = read(fd.get(), pem.data() + got, pem.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("cannot read ", flag), path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  pem.resize(got);
  if (pem.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is larger than ", kMaxPemBytes, " bytes"));
  }
  if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " holds no PEM certificate"));
  }
  return pem;
}

}  // namespace codemode
