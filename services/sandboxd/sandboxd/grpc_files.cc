// The sandbox.v1 file rpcs (UploadFile, DownloadFile, ListFiles): synchronous handlers on
// gRPC's thread pool that move bytes between the stream and the session's WorkspaceFiles.
// Each ends its wait on the sandbox once its caller is gone (cancelled, or past its
// deadline): a sandbox that stalls its file handling must not keep one of our threads per
// abandoned call (--max_rpc_threads caps them all). The bytes they move are counted as
// they cross (file_transfer_bytes_total), whether or not the transfer completes.
#include <string>

#include "absl/strings/str_cat.h"
#include "sandboxd/grpc_service.h"

namespace sandboxd {
namespace {

// How long the sandbox may take to commit an upload or list a directory, and to send a
// whole file.
constexpr absl::Duration kFileReplyTimeout = absl::Seconds(60);
constexpr absl::Duration kDownloadTimeout = absl::Minutes(5);
constexpr uint32_t kDefaultListEntries = 1000;

sandbox::v1::FileInfo ToProto(const FileEntry& e) {
  sandbox::v1::FileInfo info;
  info.set_path(e.path);
  switch (e.type) {
    case FileEntry::Type::kFile: info.set_type(sandbox::v1::FILE_TYPE_FILE); break;
    case FileEntry::Type::kDirectory: info.set_type(sandbox::v1::FILE_TYPE_DIRECTORY); break;
    case FileEntry::Type::kSymlink: info.set_type(sandbox::v1::FILE_TYPE_SYMLINK); break;
    case FileEntry::Type::kOther: info.set_type(sandbox::v1::FILE_TYPE_OTHER); break;
  }
  info.set_size(e.size);
  info.set_mtime_ms(e.mtime_ms);
  return info;
}

// Whether the rpc's caller went away (WorkspaceFiles asks while it waits).
WorkspaceFiles::Cancelled CallerGone(grpc::ServerContext* context) {
  return [context] { return context->IsCancelled(); };
}

grpc::Status Invalid(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

}  // namespace

grpc::Status SandboxServiceImpl::UploadFile(grpc::ServerContext* context,
                                            grpc::ServerReader<sandbox::v1::UploadFileRequest>* reader,
                                            sandbox::v1::FileInfo* response) {
  sandbox::v1::UploadFileRequest message;
  if (!reader->Read(&message) || !message.has_start()) {
    return Invalid("the first message of UploadFile must be 'start' (session_id and path)");
  }
  absl::StatusOr<std::shared_ptr<Session>> session =
      manager_->SessionForFiles(message.start().session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  WorkspaceFiles& files = (*session)->files();
  absl::StatusOr<uint64_t> id = files.BeginUpload(message.start().path());
  if (!id.ok()) return ToGrpcStatus(id.status());
  std::string frame;  // every chunk is encoded into this one buffer
  while (reader->Read(&message)) {
    if (message.has_start()) {
      files.Abort(*id);
      return Invalid("UploadFile takes one 'start'; the rest must be 'data'");
    }
    if (absl::Status s = files.SendChunk(*id, message.data(), &frame); !s.ok()) {
      return ToGrpcStatus(s);
    }
    manager_->metrics().FileBytes(SandboxdMetrics::Direction::kUpload, message.data().size());
  }
  // A stream that ended by cancellation is not a whole file: nothing is committed.
  if (context->IsCancelled()) {
    files.Abort(*id);
    return grpc::Status(grpc::StatusCode::CANCELLED, "the upload was cancelled");
  }
  absl::StatusOr<FileEntry> written = files.Commit(*id, kFileReplyTimeout, CallerGone(context));
  if (!written.ok()) return ToGrpcStatus(written.status());
  *response = ToProto(*written);
  return grpc::Status::OK;
}

grpc::Status SandboxServiceImpl::DownloadFile(grpc::ServerContext* context,
                                              const sandbox::v1::DownloadFileRequest* request,
                                              grpc::ServerWriter<sandbox::v1::FileChunk>* writer) {
  absl::StatusOr<std::shared_ptr<Session>> session = manager_->SessionForFiles(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  sandbox::v1::FileChunk chunk;
  SandboxdMetrics& metrics = manager_->metrics();
  absl::StatusOr<FileEntry> read = (*session)->files().Download(
      request->path(),
      [&](std::string_view data) {
        chunk.mutable_data()->assign(data.data(), data.size());  // reuses the buffer
        if (!writer->Write(chunk)) return false;
        metrics.FileBytes(SandboxdMetrics::Direction::kDownload, data.size());
        return true;
      },
      kDownloadTimeout, CallerGone(context));
  if (!read.ok()) return ToGrpcStatus(read.status());
  chunk.Clear();
  *chunk.mutable_info() = ToProto(*read);
  writer->Write(chunk);
  return grpc::Status::OK;
}

grpc::Status SandboxServiceImpl::ListFiles(grpc::ServerContext* context,
                                           const sandbox::v1::ListFilesRequest* request,
                                           sandbox::v1::ListFilesResponse* response) {
  uint32_t max_entries = request->max_entries() == 0 ? kDefaultListEntries : request->max_entries();
  if (max_entries > kMaxListEntries) {
    return Invalid(absl::StrCat("max_entries must be at most ", kMaxListEntries));
  }
  absl::StatusOr<std::shared_ptr<Session>> session = manager_->SessionForFiles(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  absl::StatusOr<WorkspaceFiles::Listing> listing =
      (*session)->files().List(request->path(), max_entries, kFileReplyTimeout, CallerGone(context));
  if (!listing.ok()) return ToGrpcStatus(listing.status());
  for (const FileEntry& e : listing->entries) *response->add_files() = ToProto(e);
  response->set_truncated(listing->truncated);
  return grpc::Status::OK;
}

}  // namespace sandboxd
