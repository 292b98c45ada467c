#include "sandboxd/wasm_snapshot.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "sandboxd/log.h"
#include "sandboxd/subprocess.h"

namespace sandboxd {

namespace fs = std::filesystem;

namespace {

std::string Hex(const unsigned char* data, unsigned size) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(data), size));
}

std::string Sha256Of(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  return Hex(digest, size);
}

}  // namespace

std::string PyodideVersion(const std::string& pyodide_dir) {
  std::ifstream in(pyodide_dir + "/package.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_object() && j.contains("version") && j["version"].is_string()) return j["version"];
  return "unknown";
}

absl::StatusOr<std::string> FileSha256(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) EVP_DigestUpdate(ctx, buf, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  EVP_MD_CTX_free(ctx);
  if (failed) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return Hex(digest, size);
}

absl::StatusOr<std::string> SnapshotKey(const std::string& node_version, const WasmFiles& files) {
  absl::StatusOr<std::string> js = FileSha256(files.js_runner);
  if (!js.ok()) return js.status();
  absl::StatusOr<std::string> py = FileSha256(files.python_runner);
  if (!py.ok()) return py.status();
  return Sha256Of(absl::StrCat(node_version, "\n", PyodideVersion(files.pyodide_dir), "\n", *js, "\n", *py))
      .substr(0, 16);
}

absl::Status CheckSnapshot(const std::string& path) {
  std::ifstream in(path + ".sha256");
  std::string want;
  std::getline(in, want);
  want = std::string(absl::StripAsciiWhitespace(want));
  absl::StatusOr<std::string> have = FileSha256(path);
  if (!have.ok() || want.empty() || *have != absl::AsciiStrToLower(want)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "wasm: the Python snapshot ", path, " is refused: its SHA-256 is ",
        have.ok() ? *have : "unreadable", ", its .sha256 says '", want.substr(0, 64),
        "'. Delete both files; sandboxd makes them again at its next start"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeSnapshot(const WasmFiles& files, const std::string& path) {
  const std::string tmp = absl::StrCat(path, ".making.", getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("wasm: cannot create ", tmp, ": ", ec.message()));
  const std::string out = tmp + "/python.snap";
  const std::string node_dir = fs::path(files.node).parent_path().parent_path().string();
  std::vector<std::string> argv = {files.node, "--permission",
                                   "--allow-fs-read=" + node_dir, "--allow-fs-read=" + files.js_runner,
                                   "--allow-fs-read=" + files.pyodide_dir,
                                   "--allow-fs-read=" + files.python_runner, "--allow-fs-read=" + tmp,
                                   "--allow-fs-write=" + tmp, "--allow-worker",
                                   files.js_runner, "--make-snapshot", out, "--pyodide", files.pyodide_dir,
                                   "--python-runner", files.python_runner};
  SubprocessOptions opts;
  opts.env = std::vector<std::string>{};
  opts.timeout = absl::Seconds(180);
  absl::StatusOr<SubprocessResult> made = RunSubprocess(argv, opts);
  absl::Status result = absl::OkStatus();
  if (!made.ok() || made->exit_code != 0) {
    result = absl::UnavailableError(absl::StrCat(
        "wasm: making the Python snapshot failed: ",
        made.ok() ? absl::StrCat("exit ", made->exit_code, ": ", made->stderr_text.substr(0, 2000))
                  : std::string(made.status().message())));
  } else if (absl::Status s = CheckSnapshot(out); !s.ok()) {
    result = s;
  } else if (chmod(out.c_str(), 0644) != 0 || chmod((out + ".sha256").c_str(), 0644) != 0 ||
             rename((out + ".sha256").c_str(), (path + ".sha256").c_str()) != 0 ||
             rename(out.c_str(), path.c_str()) != 0) {
    result = absl::UnavailableError(absl::StrCat("wasm: cannot put the snapshot at ", path));
  }
  fs::remove_all(tmp, ec);
  if (!result.ok()) return result;
  return path;
}

absl::StatusOr<std::string> SnapshotAt(const WasmFiles& files, const std::string& path) {
  const std::string lock_path = path + ".lock";
  const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    const int err = errno;
    if (lock >= 0) close(lock);
    return absl::UnavailableError(absl::StrCat("wasm: cannot lock ", lock_path, ": ", strerror(err)));
  }
  absl::StatusOr<std::string> result = path;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (absl::Status s = CheckSnapshot(path); !s.ok()) result = s;
  } else {
    spdlog::info("wasm: making the Python snapshot {} (once per Node, Pyodide and runner)", path);
    result = MakeSnapshot(files, path);
  }
  close(lock);  // and with it the lock
  return result;
}

}  // namespace sandboxd
