#include "sandboxd/workspace_files.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sandboxd/frame.h"

namespace sandboxd {
namespace {

// Raw bytes per file_chunk frame: base64 makes 1.33 MiB of a 16 MiB frame.
constexpr size_t kChunkFrameBytes = 1u << 20;

const char* KindName(FileReplyMessage::Kind k) {
  switch (k) {
    case FileReplyMessage::Kind::kError: return "file_error";
    case FileReplyMessage::Kind::kWritten: return "file_written";
    case FileReplyMessage::Kind::kData: return "file_data";
    case FileReplyMessage::Kind::kRead: return "file_read";
    case FileReplyMessage::Kind::kList: return "file_list_result";
  }
  return "?";
}

// Longest name of one directory entry (Linux's NAME_MAX).
constexpr size_t kMaxEntryNameBytes = 255;

// Whether every entry of a listing of `dir` names a direct child of it, as the runner
// answers ("out" lists "out/a.txt"). The runner is untrusted: code in the sandbox can
// answer file_list frames itself, with any paths up to the frame cap; a reply held to
// children of the listed directory carries at most max_entries x (dir + NAME_MAX) bytes of
// paths, whatever the sandbox sends.
absl::Status CheckListedChildren(const std::string& dir, const std::vector<FileEntry>& entries) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (!part.empty() && part != ".") absl::StrAppend(&prefix, part, "/");
  }
  for (const FileEntry& e : entries) {
    absl::string_view name = e.path;
    if (!absl::ConsumePrefix(&name, prefix) || name.empty() || name == "." || name == ".." ||
        name.size() > kMaxEntryNameBytes || name.find('/') != absl::string_view::npos) {
      return absl::InternalError(absl::StrCat(
          "the sandbox listed an entry that is not a child of '", dir.substr(0, 200),
          "' with a name of at most ", kMaxEntryNameBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

WorkspaceFiles::WorkspaceFiles(std::function<absl::Status(std::string)> send,
                               std::function<absl::Status(std::string_view)> send_bulk,
                               uint64_t max_file_bytes, bool binary_chunks)
    : send_(std::move(send)),
      send_bulk_(std::move(send_bulk)),
      binary_chunks_(binary_chunks),
      max_file_bytes_(max_file_bytes) {}

absl::StatusOr<uint64_t> WorkspaceFiles::Open(Transfer t,
                                              const std::function<nlohmann::json(uint64_t)>& first) {
  uint64_t id;
  {
    codemode::MutexLock lock(&mu_);
    if (!failed_.empty()) return absl::FailedPreconditionError(failed_);
    id = next_id_++;
    transfers_.emplace(id, std::move(t));
  }
  if (absl::Status s = send_(EncodeFrame(first(id))); !s.ok()) {
    codemode::MutexLock lock(&mu_);
    transfers_.erase(id);
    return absl::FailedPreconditionError(absl::StrCat("the session's runner is gone: ", s.message()));
  }
  return id;
}

absl::StatusOr<uint64_t> WorkspaceFiles::Open(FileReplyMessage::Kind expect, const std::string& path,
                                              uint32_t max_entries,
                                              const std::function<nlohmann::json(uint64_t)>& first) {
  const bool listing = expect == FileReplyMessage::Kind::kList;
  if (absl::Status s = CheckWorkspacePath(path, /*allow_empty=*/listing); !s.ok()) return s;
  Transfer t;
  t.expect = expect;
  t.path = path;
  t.max_bytes = max_file_bytes_;
  t.max_entries = max_entries;
  return Open(std::move(t), first);
}

absl::StatusOr<uint64_t> WorkspaceFiles::BeginUpload(const std::string& path) {
  return Open(FileReplyMessage::Kind::kWritten, path, 0,
              [&](uint64_t id) { return MakeFileUploadFrame(id, path, max_file_bytes_); });
}

absl::Status WorkspaceFiles::SendChunk(uint64_t id, std::string_view data, std::string* scratch) {
  absl::Status over_cap;  // frames are never sent under mu_ (a send may end the session)
  {
    codemode::MutexLock lock(&mu_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return absl::FailedPreconditionError("no such upload");
    Transfer& t = it->second;
    if (t.done) {  // the runner refused it already (or the session is gone)
      absl::Status status = t.status.ok() ? absl::InternalError("upload ended early") : t.status;
      transfers_.erase(it);
      return status;
    }
    if (t.sent + data.size() > t.max_bytes) {
      over_cap = absl::ResourceExhaustedError(absl::StrCat(
          "'", t.path.substr(0, 200), "' is larger than the ", max_file_bytes_, " byte cap"));
    } else {
      t.sent += data.size();
    }
  }
  if (!over_cap.ok()) {
    Abort(id);
    return over_cap;
  }
  size_t off = 0;
  do {  // an empty chunk is still sent
    if (binary_chunks_) {
      EncodeBinaryFileChunkInto(id, data.substr(off, kChunkFrameBytes), scratch);
    } else {
      EncodeFileChunkFrameInto(id, data.substr(off, kChunkFrameBytes), scratch);
    }
    if (absl::Status s = send_bulk_(*scratch); !s.ok()) {
      Abort(id);
      return absl::FailedPreconditionError(absl::StrCat("the session's runner is gone: ", s.message()));
    }
    off += kChunkFrameBytes;
  } while (off < data.size());
  return absl::OkStatus();
}

absl::StatusOr<FileEntry> WorkspaceFiles::Commit(uint64_t id, absl::Duration timeout,
                                                 const Cancelled& cancelled) {
  std::string path;
  uint64_t sent;
  {
    codemode::MutexLock lock(&mu_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return absl::FailedPreconditionError("no such upload");
    path = it->second.path;
    sent = it->second.sent;
  }
  if (absl::Status s = send_(EncodeFrame(MakeFileCommitFrame(id))); !s.ok()) {
    Abort(id);
    return absl::FailedPreconditionError(absl::StrCat("the session's runner is gone: ", s.message()));
  }
  absl::StatusOr<FileReplyMessage> written = AwaitFinal(id, timeout, cancelled);
  if (!written.ok()) return written.status();
  // The size is what we sent, not what the sandbox claims.
  return FileEntry{path, FileEntry::Type::kFile, sent, 0};
}

void WorkspaceFiles::Abort(uint64_t id) {
  bool open;
  {
    codemode::MutexLock lock(&mu_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    open = !it->second.done;
    transfers_.erase(it);
  }
  if (open) (void)send_(EncodeFrame(MakeFileAbortFrame(id)));
}

WorkspaceFiles::Waited WorkspaceFiles::AwaitLocked(const absl::Condition& cond, SteadyTime deadline,
                                                   const Cancelled& cancelled) {
  for (;;) {
    const SteadyTime slice = cancelled ? std::min(deadline, codemode::SteadyDeadline(kCancelPoll)) : deadline;
    if (mu_.AwaitWithTimeout(cond, absl::FromChrono(slice - std::chrono::steady_clock::now()))) {
      return Waited::kReady;
    }
    if (std::chrono::steady_clock::now() >= deadline) return Waited::kTimedOut;
    if (cancelled()) return Waited::kCancelled;
  }
}

absl::StatusOr<FileReplyMessage> WorkspaceFiles::AwaitFinal(uint64_t id, absl::Duration timeout,
                                                            const Cancelled& cancelled) {
  Waited waited;
  {
    codemode::MutexLock lock(&mu_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return absl::FailedPreconditionError("no such transfer");
    Transfer& t = it->second;
    waited = AwaitLocked(absl::Condition(+[](bool* done) { return *done; }, &t.done),
                         codemode::SteadyDeadline(timeout), cancelled);
    if (waited == Waited::kReady) {
      absl::Status status = t.status;
      FileReplyMessage final = std::move(t.final);
      transfers_.erase(it);
      if (!status.ok()) return status;
      return final;
    }
  }
  Abort(id);  // an upload's temporary file goes
  if (waited == Waited::kCancelled) return absl::CancelledError("the caller went away");
  return absl::DeadlineExceededError("the sandbox did not answer the file operation in time");
}

absl::StatusOr<FileEntry> WorkspaceFiles::Download(const std::string& path,
                                                   const std::function<bool(std::string_view)>& sink,
                                                   absl::Duration timeout,
                                                   const Cancelled& cancelled) {
  absl::StatusOr<uint64_t> id = Open(FileReplyMessage::Kind::kRead, path, 0, [&](uint64_t id) {
    return MakeFileDownloadFrame(id, path, max_file_bytes_);
  });
  if (!id.ok()) return id.status();
  const SteadyTime deadline = codemode::SteadyDeadline(timeout);
  for (;;) {
    std::deque<std::string> chunks;
    bool done;
    {
      codemode::MutexLock lock(&mu_);
      Transfer& tr = transfers_.at(*id);
      auto ready = [](Transfer* x) { return x->done || !x->chunks.empty(); };
      Waited waited = AwaitLocked(absl::Condition(+ready, &tr), deadline, cancelled);
      if (waited != Waited::kReady) {
        transfers_.erase(*id);  // later file_data frames are dropped
        if (waited == Waited::kCancelled) return absl::CancelledError("the caller went away");
        return absl::DeadlineExceededError("the sandbox did not send the file in time");
      }
      chunks.swap(tr.chunks);
      done = tr.done;
    }
    for (const std::string& c : chunks) {
      if (!sink(c)) {
        codemode::MutexLock lock(&mu_);
        transfers_.erase(*id);
        return absl::CancelledError("the client went away");
      }
    }
    if (done) break;
  }
  absl::StatusOr<FileReplyMessage> read = AwaitFinal(*id, timeout, cancelled);
  if (!read.ok()) return read.status();
  return FileEntry{path, FileEntry::Type::kFile, read->size, read->mtime_ms};
}

absl::StatusOr<WorkspaceFiles::Listing> WorkspaceFiles::List(const std::string& path,
                                                             uint32_t max_entries,
                                                             absl::Duration timeout,
                                                             const Cancelled& cancelled) {
  absl::StatusOr<uint64_t> id = Open(FileReplyMessage::Kind::kList, path, max_entries,
                                     [&](uint64_t id) { return MakeFileListFrame(id, path, max_entries); });
  if (!id.ok()) return id.status();
  absl::StatusOr<FileReplyMessage> listed = AwaitFinal(*id, timeout, cancelled);
  if (!listed.ok()) return listed.status();
  return Listing{std::move(listed->entries), listed->truncated};
}

void WorkspaceFiles::OnReply(FileReplyMessage reply) {
  codemode::MutexLock lock(&mu_);
  auto it = transfers_.find(reply.id);
  if (it == transfers_.end() || it->second.done) return;  // aborted, timed out or finished
  Transfer& t = it->second;
  using Kind = FileReplyMessage::Kind;
  if (reply.kind == Kind::kError) return FinishLocked(t, FileErrorStatus(reply));
  if (reply.kind == Kind::kData && t.expect == Kind::kRead) {
    t.received += reply.data.size();
    if (t.received > t.max_bytes) {
      return FinishLocked(t, absl::ResourceExhaustedError(absl::StrCat(
                                 "the sandbox sent more than the ", t.max_bytes, " byte cap")));
    }
    t.chunks.push_back(std::move(reply.data));
    return;
  }
  if (reply.kind != t.expect) {
    return FinishLocked(t, absl::InternalError(absl::StrCat(
                               "the sandbox answered ", KindName(reply.kind), " where ",
                               KindName(t.expect), " was due")));
  }
  if (reply.kind == Kind::kRead && reply.size != t.received) {
    return FinishLocked(t, absl::InternalError(absl::StrCat(
                               "the sandbox announced ", reply.size, " bytes and sent ", t.received)));
  }
  if (reply.kind == Kind::kList && reply.entries.size() > t.max_entries) {
    return FinishLocked(t, absl::InternalError("the sandbox listed more entries than asked for"));
  }
  if (reply.kind == Kind::kList) {
    if (absl::Status s = CheckListedChildren(t.path, reply.entries); !s.ok()) {
      return FinishLocked(t, std::move(s));
    }
  }
  t.final = std::move(reply);
  FinishLocked(t, absl::OkStatus());
}

void WorkspaceFiles::FinishLocked(Transfer& t, absl::Status status) {
  t.done = true;
  t.status = std::move(status);
}

void WorkspaceFiles::Fail(const std::string& reason) {
  codemode::MutexLock lock(&mu_);
  failed_ = reason.empty() ? "the session is gone" : reason;
  for (auto& [id, t] : transfers_) {
    if (!t.done) FinishLocked(t, absl::FailedPreconditionError(failed_));
  }
}

bool WorkspaceFiles::busy() const {
  codemode::MutexLock lock(&mu_);
  return !transfers_.empty();
}

}  // namespace sandboxd
