#include "sandboxd/record_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string message = absl::StrCat(what, ": ", strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("cannot write ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidRecordKey(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

absl::Status DirRecordStore::Put(const std::string& key, const std::string& contents) {
  if (!IsValidRecordKey(key)) return absl::InvalidArgumentError("invalid record key");
  std::string path = PathOf(key);
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", tmp));
  absl::Status st = WriteAll(fd, contents, tmp);
  // close() reports write-back errors of some filesystems (NFS, a full quota).
  if (close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, absl::StrCat("cannot write ", tmp));
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoStatus(errno, absl::StrCat("cannot rename ", tmp));
  }
  if (!st.ok()) unlink(tmp.c_str());
  return st;
}

absl::Status DirRecordStore::Delete(const std::string& key) {
  if (!IsValidRecordKey(key)) return absl::InvalidArgumentError("invalid record key");
  std::string path = PathOf(key);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("cannot remove ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> DirRecordStore::List() {
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot read ", dir_, ": ", ec.message()));
  std::vector<std::pair<std::string, std::string>> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("cannot read ", dir_, ": ", ec.message()));
    std::string name = it->path().filename().string();
    if (absl::EndsWith(name, ".json.tmp")) {
      fs::remove(it->path(), ec);  // a write that a crash cut short; the old record stands
      ec.clear();
      continue;
    }
    if (!absl::EndsWith(name, ".json")) continue;
    std::string key = name.substr(0, name.size() - 5);
    if (!IsValidRecordKey(key)) continue;
    std::ifstream in(it->path());
    std::stringstream buf;
    buf << in.rdbuf();
    out.emplace_back(key, buf.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace sandboxd
