// libFuzzer target: the listings a hostile sandbox answers to the gateway's walk of out/
// (its code can answer sandboxd's file_list frames itself). The input is a script of
// listings: for each ListFiles the walk makes, entries of fuzzed type and path (a path is
// a fuzzed prefix padded to a fuzzed length, so a few bytes can ask for 8 KiB paths), or
// an error. Whatever the listings say, the walk lists at most max_directories directories,
// asks for no directory outside out/ or longer than max_path_bytes, and keeps at most
// max_files files under out/ whose paths fit max_path_bytes and, together, max_bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bridge/produced_files.h"

namespace {

using sandbox::v1::ListFilesResponse;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string Bytes(size_t n) {
    std::string out;
    while (n-- > 0 && pos_ < size_) out += static_cast<char>(data_[pos_++]);
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr gateway::OutLimits kLimits = {/*max_files=*/40, /*max_directories=*/6,
                                        /*max_depth=*/4, /*max_path_bytes=*/300,
                                        /*max_bytes=*/3000};

class ScriptedSandboxes : public gateway::Sandboxes {
 public:
  explicit ScriptedSandboxes(Reader* in) : in_(in) {}
  int calls = 0;

  std::string EndpointName(size_t) const override { return "fuzz"; }
  std::optional<size_t> FindEndpoint(const std::string&) const override { return std::nullopt; }

  absl::StatusOr<ListFilesResponse> ListFiles(const gateway::SandboxRef&, const std::string& dir,
                                              uint32_t max_entries, absl::Time,
                                              std::shared_ptr<codemode::CancelToken>) override {
    ++calls;
    if (calls > static_cast<int>(kLimits.max_directories)) __builtin_trap();
    if (dir.size() > kLimits.max_path_bytes || dir.compare(0, 3, "out") != 0) __builtin_trap();
    if (max_entries > kLimits.max_files + kLimits.max_directories) __builtin_trap();
    const uint8_t head = in_->Byte();
    if (head == 0xff) return absl::NotFoundError("vanished");
    if (head == 0xfe) return absl::UnavailableError("sandboxd went away");
    ListFilesResponse r;
    r.set_truncated(head & 0x80);
    // Up to 4x what was asked for: sandboxd refuses that, but the walk must not rely on it.
    const uint32_t count = (head & 0x7f) * 8 % (4 * max_entries + 1);
    for (uint32_t i = 0; i < count && !in_->empty(); ++i) {
      const uint8_t type = in_->Byte();
      const size_t length = (static_cast<size_t>(in_->Byte()) << 5) | (type >> 3);  // up to 8 KiB
      std::string path = (type & 4) ? dir + "/" : "";
      path += in_->Bytes(in_->Byte() % 16);
      if (path.size() < length) path.resize(length, 'p');
      sandbox::v1::FileInfo* f = r.add_files();
      f->set_path(std::move(path));
      f->set_type(static_cast<sandbox::v1::FileType>(type & 3));
      f->set_size(type);
      f->set_mtime_ms(i);
    }
    return r;
  }

  absl::StatusOr<gateway::SandboxRef> CreateSession(const std::string&, const std::string&,
                                                    const sandbox::v1::Catalog&, const Room&,
                                                    const std::string&, const std::string&) override {
    return gateway::SandboxRef{};
  }
  absl::Status DeleteSession(const gateway::SandboxRef&) override { return absl::OkStatus(); }
  Owned ListOwned(const std::string&, absl::Time, std::shared_ptr<codemode::CancelToken>) override { return {}; }
  absl::Status ResetSession(const gateway::SandboxRef&) override { return absl::OkStatus(); }
  absl::Status UploadFile(const gateway::SandboxRef&, const std::string&, const std::string&,
                          std::shared_ptr<codemode::CancelToken>) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> DownloadFile(const gateway::SandboxRef&, const std::string&,
                                           size_t, absl::Time,
                                           std::shared_ptr<codemode::CancelToken>) override {
    return absl::NotFoundError("none");
  }
  absl::StatusOr<sandbox::v1::Finished> Execute(const gateway::SandboxRef&, const std::string&,
                                                uint32_t, const sandbox::v1::Catalog*,
                                                const gateway::ExecuteHandlers&,
                                                std::shared_ptr<codemode::CancelToken>) override {
    return absl::UnimplementedError("not here");
  }

 private:
  Reader* in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  ScriptedSandboxes sandboxes(&in);
  absl::StatusOr<gateway::OutListing> listing = gateway::ListOut(sandboxes, {}, kLimits, absl::InfiniteFuture(),
                                                                   /*cancel=*/nullptr);  // no request to cancel
  if (!listing.ok()) return 0;
  if (listing->files.size() > kLimits.max_files) __builtin_trap();
  size_t bytes = 0;
  for (size_t i = 0; i < listing->files.size(); ++i) {
    const gateway::OutFile& f = listing->files[i];
    if (f.path.empty() || f.path.size() + 4 > kLimits.max_path_bytes) __builtin_trap();
    if (i > 0 && listing->files[i - 1].path > f.path) __builtin_trap();
    bytes += f.path.size() + 4;
  }
  if (bytes > kLimits.max_bytes) __builtin_trap();
  // Diffing a walk against itself finds nothing.
  if (!gateway::ChangedFiles(listing->files, listing->files).empty()) __builtin_trap();
  return 0;
}
