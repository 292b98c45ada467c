// WorkspaceFiles: one session's file transfers with its runner (docs/runner-protocol.md,
// "Files"). It numbers the transfers, sends their frames, and hands the runner's replies
// to the caller waiting for them: an rpc thread of UploadFile, DownloadFile or ListFiles.
// Transfers run beside the session's executions; they do not queue behind them.
//
//   WorkspaceFiles files(send, 64 << 20);
//   ASSIGN_OR_RETURN(uint64_t id, files.BeginUpload("data/in.csv"));
//   RETURN_IF_ERROR(files.SendChunk(id, bytes, &scratch));         // an early failure shows here
//   ASSIGN_OR_RETURN(FileEntry written, files.Commit(id, absl::Seconds(30)));
//
// Everything the runner sends is untrusted: a download that brings more bytes than it
// may, or a listing with more entries than asked for, fails that transfer (the runner's
// replies are validated by ParseFileReply first). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"
#include "sandboxd/file_frames.h"

namespace sandboxd {

class WorkspaceFiles {
 public:
  // Asked while a call waits on the sandbox: true once its caller went away (a cancelled
  // or expired rpc). The wait then ends, the transfer is dropped and the call returns
  // CANCELLED. Empty: the caller never goes away.
  using Cancelled = std::function<bool()>;
  // How often a waiting call asks `Cancelled` (gRPC's sync api cannot wake it).
  static constexpr absl::Duration kCancelPoll = absl::Milliseconds(200);

  // `send` delivers one encoded frame (EncodeFrame) to the runner without waiting;
  // `send_bulk` delivers a file chunk from the caller's buffer, waiting for the runner to
  // take it (RunnerConnection::SendBulk), which paces uploads. A failure of either means
  // the session is going away. `binary_chunks`: the runner reads binary file_chunk frames
  // (its version is at least kBinaryChunksSinceRunner); else they go as base64 JSON.
  WorkspaceFiles(std::function<absl::Status(std::string)> send,
                 std::function<absl::Status(std::string_view)> send_bulk, uint64_t max_file_bytes,
                 bool binary_chunks);

  uint64_t max_file_bytes() const { return max_file_bytes_; }

  // Uploads: begin, chunks in order, then commit (or abort). A failure the runner reports
  // early (a bad path, the cap, a full workspace) is returned by the next SendChunk or by
  // Commit, and the upload is over; Abort is still harmless.
  absl::StatusOr<uint64_t> BeginUpload(const std::string& path);
  // `scratch` holds the encoded frame; pass the same string for every chunk of an upload
  // and its capacity is reused.
  absl::Status SendChunk(uint64_t id, std::string_view data, std::string* scratch);
  absl::StatusOr<FileEntry> Commit(uint64_t id, absl::Duration timeout,
                                   const Cancelled& cancelled = {});
  void Abort(uint64_t id);

  // Streams a file to `sink` in the runner's chunks, from the calling thread; `sink`
  // returning false (the client went away) ends the download. The file's size and mtime
  // on success.
  absl::StatusOr<FileEntry> Download(const std::string& path,
                                     const std::function<bool(std::string_view)>& sink,
                                     absl::Duration timeout, const Cancelled& cancelled = {});

  struct Listing {
    std::vector<FileEntry> entries;
    bool truncated = false;
  };
  absl::StatusOr<Listing> List(const std::string& path, uint32_t max_entries,
                               absl::Duration timeout, const Cancelled& cancelled = {});

  // A reply from the runner (reader thread). Replies for unknown transfers are dropped.
  void OnReply(FileReplyMessage reply);
  // The session is gone: every transfer fails with FAILED_PRECONDITION `reason`, and so
  // does every later call.
  void Fail(const std::string& reason);
  // True while a transfer is open (the idle reaper leaves the session alone).
  bool busy() const;

 private:
  struct Transfer {
    FileReplyMessage::Kind expect = FileReplyMessage::Kind::kWritten;  // the final reply
    std::string path;
    uint64_t max_bytes = 0;
    uint32_t max_entries = 0;
    uint64_t sent = 0;      // upload: bytes sent
    uint64_t received = 0;  // download: bytes received
    std::deque<std::string> chunks;  // download: received, not yet given to the sink
    bool done = false;
    absl::Status status;    // once done: OK or why not
    FileReplyMessage final;
  };

  // Checks `path` (empty only for a listing), registers a transfer that ends with an
  // `expect` reply and sends its first frame, made by `first(id)`.
  absl::StatusOr<uint64_t> Open(FileReplyMessage::Kind expect, const std::string& path,
                                uint32_t max_entries,
                                const std::function<nlohmann::json(uint64_t)>& first);
  absl::StatusOr<uint64_t> Open(Transfer t, const std::function<nlohmann::json(uint64_t)>& first);
  // Waits until transfer `id` is done, removes it and returns its final reply.
  absl::StatusOr<FileReplyMessage> AwaitFinal(uint64_t id, absl::Duration timeout,
                                              const Cancelled& cancelled);
  enum class Waited { kReady, kTimedOut, kCancelled };
  using SteadyTime = std::chrono::steady_clock::time_point;
  // Waits until `cond` holds, `deadline` passes or `cancelled` says the caller left,
  // asking it every kCancelPoll.
  Waited AwaitLocked(const absl::Condition& cond, SteadyTime deadline, const Cancelled& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(Transfer& t, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<absl::Status(std::string)> send_;
  const std::function<absl::Status(std::string_view)> send_bulk_;
  const bool binary_chunks_;
  const uint64_t max_file_bytes_;
  mutable codemode::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Transfer> transfers_ ABSL_GUARDED_BY(mu_);
  std::string failed_ ABSL_GUARDED_BY(mu_);  // non-empty: the session is gone
};

}  // namespace sandboxd
