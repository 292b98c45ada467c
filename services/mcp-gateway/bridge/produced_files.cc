// Produced files: walking out/, diffing walks, resource URIs. See produced_files.h.
#include "bridge/produced_files.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/untrusted_json.h"

namespace gateway {
namespace {

constexpr char kUriPrefix[] = "sandbox://session/";
constexpr char kHandleUriPrefix[] = "sandbox://handle/";
constexpr char kOutSegment[] = "/out/";
// A path under out/ is at most Linux's PATH_MAX decoded; the URI may spell every byte of it
// as a %XX escape after the longest owner, so every URI this server writes it also reads.
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxUriBytes =
    sizeof(kHandleUriPrefix) + kMaxHandleInUri + sizeof(kOutSegment) + 3 * kMaxPathBytes;

bool IsUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

bool IsSessionName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '_';
  });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    const int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("the URI has a bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

absl::StatusOr<OutListing> ListOut(Sandboxes& sandboxes, const SandboxRef& ref,
                                   const OutLimits& limits, absl::Time deadline,
                                   const std::shared_ptr<codemode::CancelToken>& cancel) {
  OutListing listing;
  std::deque<std::pair<std::string, uint32_t>> dirs = {{kOutDir, 0}};  // path, depth
  uint32_t listed = 0;
  uint64_t bytes = 0;  // path bytes held: kept files and queued directories
  const std::string out_prefix = std::string(kOutDir) + "/";
  // Whether `path` may be held: short enough, and within the walk's byte budget.
  auto admit = [&](const std::string& path) {
    if (path.size() > limits.max_path_bytes || bytes + path.size() > limits.max_bytes) {
      listing.truncated = true;
      return false;
    }
    bytes += path.size();
    return true;
  };
  while (!dirs.empty()) {
    auto [dir, depth] = std::move(dirs.front());
    dirs.pop_front();
    bytes -= dir == kOutDir ? 0 : dir.size();
    if (listed == limits.max_directories || listing.files.size() == limits.max_files) {
      listing.truncated = true;  // directories left unlisted may hold files
      break;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      return absl::CancelledError(absl::StrCat("the walk of out/ stopped: ", cancel->reason()));
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("the walk of out/ ran out of time");
    ++listed;
    // Room for the files still wanted and for the directories that may still be walked.
    const uint32_t room = limits.max_files - static_cast<uint32_t>(listing.files.size()) +
                          limits.max_directories;
    absl::StatusOr<sandbox::v1::ListFilesResponse> entries = sandboxes.ListFiles(ref, dir, room, deadline, cancel);
    if (!entries.ok()) {
      // out/ itself missing is "nothing produced"; a subdirectory that vanished since its
      // parent was listed is skipped.
      if (absl::IsNotFound(entries.status())) continue;
      return entries.status();
    }
    listing.truncated |= entries->truncated();
    for (const sandbox::v1::FileInfo& f : entries->files()) {
      const std::string& path = f.path();
      if (path.size() <= out_prefix.size() || path.compare(0, out_prefix.size(), out_prefix) != 0) {
        continue;  // not under out/: sandboxd never answers so, but the walk stays in out/
      }
      if (f.type() == sandbox::v1::FILE_TYPE_DIRECTORY) {
        // Only as many directories are queued as may still be listed: a listing of a
        // million directories costs no more than the walk lists.
        if (depth + 1 >= limits.max_depth || listed + dirs.size() >= limits.max_directories) {
          listing.truncated = true;
        } else if (admit(path)) {
          dirs.emplace_back(path, depth + 1);
        }
      } else if (f.type() == sandbox::v1::FILE_TYPE_FILE) {
        if (listing.files.size() == limits.max_files) {
          listing.truncated = true;
        } else if (admit(path)) {
          listing.files.push_back({path.substr(out_prefix.size()), f.size(), f.mtime_ms()});
        }
      }
    }
  }
  std::stable_sort(listing.files.begin(), listing.files.end(),
                   [](const OutFile& a, const OutFile& b) { return a.path < b.path; });
  // A hostile listing can name a file twice; the walk keeps the first (ChangedFiles and
  // resources/list rely on one entry per path).
  listing.files.erase(std::unique(listing.files.begin(), listing.files.end(),
                                  [](const OutFile& a, const OutFile& b) { return a.path == b.path; }),
                      listing.files.end());
  return listing;
}

std::vector<OutFile> ChangedFiles(const std::vector<OutFile>& before,
                                  const std::vector<OutFile>& after) {
  std::vector<OutFile> changed;
  auto b = before.begin();
  for (const OutFile& f : after) {
    while (b != before.end() && b->path < f.path) ++b;
    if (b == before.end() || !(*b == f)) changed.push_back(f);
  }
  return changed;
}

std::string OutFileUri(const std::string& session, const std::string& path) {
  return OutFileUriIn(absl::StrCat(kUriPrefix, session, kOutSegment), path);
}

std::string OutFileUriOfHandle(const std::string& handle, const std::string& path) {
  return OutFileUriIn(absl::StrCat(kHandleUriPrefix, handle, kOutSegment), path);
}

std::string OutFileUriIn(std::string uri, const std::string& path) {
  for (unsigned char c : path) {
    if (IsUnreserved(c) || c == '/') {
      uri += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 0xf];
    }
  }
  return uri;
}

std::string OutUriTemplate(const std::string& session) {
  return absl::StrCat(kUriPrefix, session, kOutSegment, "{+path}");
}

absl::StatusOr<OutFileRef> ParseOutFileUri(const std::string& uri) {
  if (uri.size() > kMaxUriBytes) return absl::InvalidArgumentError("the URI is too long");
  absl::string_view rest = uri;
  const bool by_handle = absl::ConsumePrefix(&rest, kHandleUriPrefix);
  if (!by_handle && !absl::ConsumePrefix(&rest, kUriPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a resource of this server: URIs look like ", kHandleUriPrefix, "<sandbox>/out/<path> or ",
        kUriPrefix, "<session>/out/<path>"));
  }
  const size_t slash = rest.find('/');
  OutFileRef ref;
  std::string& owner = by_handle ? ref.handle : ref.session;
  owner = std::string(rest.substr(0, slash));
  // A handle is "sbx1_" and base64url, as unreserved as a session name, only longer.
  if (slash == absl::string_view::npos || owner.empty() || owner.size() > kMaxHandleInUri ||
      (!by_handle && !IsSessionName(owner)) ||
      !std::all_of(owner.begin(), owner.end(), [](unsigned char c) { return IsUnreserved(c); })) {
    return absl::InvalidArgumentError(by_handle ? "the URI names no sandbox" : "the URI names no session");
  }
  rest.remove_prefix(slash);
  if (!absl::ConsumePrefix(&rest, kOutSegment)) {
    return absl::InvalidArgumentError("only files under out/ are resources");
  }
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError("the URI may not have a query or a fragment");
  }
  absl::StatusOr<std::string> path = PercentDecode(rest);
  if (!path.ok()) return path.status();
  if (path->size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the path is longer than ", kMaxPathBytes, " bytes"));
  }
  if (path->find('\0') != std::string::npos || !codemode::IsValidUtf8(*path)) {
    return absl::InvalidArgumentError("the path must be UTF-8 without NUL bytes");
  }
  for (absl::string_view part : absl::StrSplit(*path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          "the path may not have empty, '.' or '..' segments: it names a file under out/");
    }
  }
  ref.path = std::move(*path);
  return ref;
}

std::string MimeTypeForPath(const std::string& path) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".png", "image/png"},          {".jpg", "image/jpeg"},       {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},          {".webp", "image/webp"},      {".svg", "image/svg+xml"},
      {".pdf", "application/pdf"},    {".json", "application/json"}, {".csv", "text/csv"},
      {".tsv", "text/tab-separated-values"}, {".txt", "text/plain"}, {".log", "text/plain"},
      {".md", "text/markdown"},       {".html", "text/html"},       {".htm", "text/html"},
      {".xml", "application/xml"},    {".yaml", "application/yaml"}, {".yml", "application/yaml"},
      {".py", "text/x-python"},       {".js", "text/javascript"},   {".zip", "application/zip"},
      {".parquet", "application/vnd.apache.parquet"}};
  const size_t slash = path.rfind('/');
  const std::string name = absl::AsciiStrToLower(slash == std::string::npos ? path : path.substr(slash + 1));
  for (const auto& [ext, mime] : kTypes) {
    if (absl::EndsWith(name, ext)) return mime;
  }
  return "application/octet-stream";
}

bool IsTextMimeType(const std::string& mime) {
  return absl::StartsWith(mime, "text/") || mime == "application/json" ||
         mime == "application/xml" || mime == "application/yaml" || mime == "image/svg+xml";
}

}  // namespace gateway
