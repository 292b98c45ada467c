// Integration: files in and out of a session's workspace through the runner (UploadFile,
// DownloadFile, ListFiles) against real Podman, in both isolation modes: the bytes that
// come back are the bytes that went in, code sees uploads and its own files come out,
// nothing leads outside the workspace, and the caps hold without losing the session.
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::FileChunk;
using sandbox::v1::FileInfo;
using sandbox::v1::Finished;
using sandbox::v1::UploadFileRequest;

constexpr size_t kMaxFileBytes = 8u << 20;

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

class FilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new SandboxdProcess({absl::StrCat("--max_file_bytes=", kMaxFileBytes)});
    ASSERT_TRUE(daemon_->Start());
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    stub_ = daemon_->Stub();
    session_ = CreateSession(*stub_).id();
  }

  // Uploads `data` in chunks of `chunk` bytes; the final status, and the FileInfo.
  grpc::Status Upload(const std::string& path, const std::string& data, FileInfo* info = nullptr,
                      size_t chunk = 256 * 1024, const std::string& session = "") {
    grpc::ClientContext ctx;
    FileInfo out;
    auto writer = stub_->UploadFile(&ctx, &out);
    UploadFileRequest start;
    start.mutable_start()->set_session_id(session.empty() ? session_ : session);
    start.mutable_start()->set_path(path);
    writer->Write(start);
    for (size_t off = 0; off < data.size(); off += chunk) {
      UploadFileRequest m;
      m.set_data(data.substr(off, chunk));
      if (!writer->Write(m)) break;  // the server ended the call early
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (info) *info = out;
    return st;
  }

  grpc::Status Download(const std::string& path, std::string* data, FileInfo* info = nullptr) {
    grpc::ClientContext ctx;
    sandbox::v1::DownloadFileRequest req;
    req.set_session_id(session_);
    req.set_path(path);
    auto reader = stub_->DownloadFile(&ctx, req);
    FileChunk c;
    data->clear();
    while (reader->Read(&c)) {
      *data += c.data();
      if (c.has_info() && info) *info = c.info();
    }
    return reader->Finish();
  }

  grpc::Status List(const std::string& path, sandbox::v1::ListFilesResponse* out,
                    uint32_t max_entries = 0) {
    grpc::ClientContext ctx;
    sandbox::v1::ListFilesRequest req;
    req.set_session_id(session_);
    req.set_path(path);
    req.set_max_entries(max_entries);
    return stub_->ListFiles(&ctx, req, out);
  }

  void ExpectSessionAlive() {
    Finished f = RunCode(*stub_, session_, "1 + 1");
    EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
    EXPECT_EQ(f.result_repr(), "2");
  }

  static SandboxdProcess* daemon_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
  std::string session_;
};

SandboxdProcess* FilesTest::daemon_ = nullptr;

TEST_F(FilesTest, UploadCodeReadsItWritesFilesAndDownloadReturnsTheSameBytes) {
  const std::string data = RandomBytes(3 * 1024 * 1024 + 11, 1);
  FileInfo info;
  grpc::Status st = Upload("in/data.bin", data, &info);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(info.path(), "in/data.bin");
  EXPECT_EQ(info.size(), data.size());

  // The code sees the upload (same checksum) and writes a CSV and a PNG-like binary file.
  Finished f = RunCode(*stub_, session_, R"py(
import hashlib, os, zlib
blob = open('/workspace/in/data.bin', 'rb').read()
os.makedirs('/workspace/out', exist_ok=True)
with open('/workspace/out/table.csv', 'w') as fh:
    fh.write('n,square\n' + ''.join(f'{i},{i*i}\n' for i in range(1000)))
with open('/workspace/out/chart.png', 'wb') as fh:
    fh.write(b'\x89PNG\r\n\x1a\n' + zlib.compress(blob[:100000]))
hashlib.sha256(blob).hexdigest()
)py");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  std::string expected_csv = "n,square\n";
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&expected_csv, i, ",", i * i, "\n");

  std::string got;
  ASSERT_TRUE(Download("in/data.bin", &got, &info).ok());
  EXPECT_TRUE(got == data) << "the uploaded bytes changed on the way back";
  EXPECT_EQ(info.size(), data.size());
  EXPECT_GT(info.mtime_ms(), 0);
  ASSERT_TRUE(Download("out/table.csv", &got).ok());
  EXPECT_EQ(got, expected_csv);
  ASSERT_TRUE(Download("out/chart.png", &got).ok());
  EXPECT_EQ(got.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // The code's own checksum of the upload, in the Python result, matches ours.
  Finished check = RunCode(*stub_, session_,
                           "import hashlib\nhashlib.sha256(open('/workspace/out/chart.png','rb')"
                           ".read()).hexdigest()");
  ASSERT_EQ(check.status(), Finished::OK);
  EXPECT_GT(check.result_repr().size(), 60u);

  sandbox::v1::ListFilesResponse list;
  ASSERT_TRUE(List("out", &list).ok());
  ASSERT_EQ(list.files_size(), 2);
  EXPECT_EQ(list.files(0).path(), "out/chart.png");
  EXPECT_EQ(list.files(1).path(), "out/table.csv");
  EXPECT_EQ(list.files(1).type(), sandbox::v1::FILE_TYPE_FILE);
  EXPECT_EQ(list.files(1).size(), expected_csv.size());
  ASSERT_TRUE(List("", &list).ok());
  EXPECT_EQ(list.files_size(), 2);  // in/ and out/
}

TEST_F(FilesTest, PathsOutsideTheWorkspaceAreRefused) {
  // A symlink planted by the code, pointing at the container's own files, and one at a
  // directory outside the workspace.
  Finished f = RunCode(*stub_, session_,
                       "import os\nos.symlink('/etc/passwd', '/workspace/passwd')\n"
                       "os.symlink('/tmp', '/workspace/tmpdir')\n"
                       "open('/tmp/outside.txt', 'w').write('outside')");
  if (TestIsolation() == "wasm") {
    // Node's permission model lets the code make no symlink: they are planted from the
    // host, in the workspace the runner serves (the one holding the code's marker file; under
    // bwrap the sandbox's own tmpfs, seen through /proc/<pid>/root, where only the session's
    // uid can make files).
    ASSERT_EQ(f.status(), Finished::ERROR) << f.DebugString();
    EXPECT_EQ(f.error().type(), "PermissionError") << f.DebugString();
    f = RunCode(*stub_, session_, "open('/tmp/outside.txt', 'w').write('outside')\n"
                "open('/workspace/.marker-" + session_ + "', 'w').close()");
    ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
    int rc = 0;
    const std::string marker = absl::StrCat(TestWasmDir(), "/w/*/.marker-", session_);
    Sh(absl::StrCat("cd \"$(dirname \"$(ls -d ", marker, " /proc/[0-9]*/root", marker,
                    " 2>/dev/null | head -1)\")\" && setpriv --reuid=$(stat -c %u .) --regid=$(stat -c %g .) "
                    "--clear-groups sh -c 'rm .marker-", session_, " && ln -s /etc/passwd passwd && ln -s /tmp tmpdir'"),
       &rc);
    ASSERT_EQ(rc, 0) << "cannot plant the symlinks in the session's workspace";
  }
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  std::string got;
  for (const std::string path : {"/etc/passwd", "../etc/passwd", "in/../../etc/passwd",
                                 "passwd", "tmpdir/outside.txt", ""}) {
    grpc::Status st = Download(path, &got);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path << ": " << st.error_message();
    EXPECT_EQ(got, "") << path;
  }
  for (const std::string path : {"/tmp/planted", "../planted", "tmpdir/planted", "tmpdir/new/x"}) {
    grpc::Status st = Upload(path, "planted");
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path << ": " << st.error_message();
  }
  f = RunCode(*stub_, session_, "import os\nsorted(os.listdir('/tmp'))");
  EXPECT_EQ(f.result_repr(), "['outside.txt']") << "an upload landed outside the workspace";
  sandbox::v1::ListFilesResponse list;
  EXPECT_EQ(List("tmpdir", &list).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(List("../", &list).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectSessionAlive();
}

TEST_F(FilesTest, CapsAndAFullWorkspaceFailTheTransferNotTheSession) {
  // Over the daemon's per-file cap: refused before anything is renamed into place.
  ASSERT_TRUE(Upload("big.bin", "old").ok());
  grpc::Status st = Upload("big.bin", std::string(kMaxFileBytes + 1, 'x'), nullptr, 1 << 20);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  std::string got;
  ASSERT_TRUE(Download("big.bin", &got).ok());
  EXPECT_EQ(got, "old") << "a refused upload replaced the file";
  // A file the code made larger than the cap cannot be downloaded.
  Finished f = RunCode(*stub_, session_, absl::StrCat(
      "open('/workspace/huge.bin', 'wb').write(b'y' * ", kMaxFileBytes + 1, ")"));
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  st = Download("huge.bin", &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();

  // A workspace of 16 MiB: the third 7 MiB upload does not fit.
  sandbox::v1::CreateSessionRequest small;
  small.mutable_limits()->set_workspace_bytes(16u << 20);
  std::string tight = CreateSession(*stub_, small).id();
  const std::string seven(7u << 20, 'z');
  ASSERT_TRUE(Upload("a.bin", seven, nullptr, 1 << 20, tight).ok());
  ASSERT_TRUE(Upload("b.bin", seven, nullptr, 1 << 20, tight).ok());
  st = Upload("c.bin", seven, nullptr, 1 << 20, tight);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  f = RunCode(*stub_, tight, "import os\nsorted(os.listdir('/workspace'))");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "['a.bin', 'b.bin']") << "a failed upload left a file behind";
  ExpectSessionAlive();
}

TEST_F(FilesTest, BadRequestsGetClearErrors) {
  std::string got;
  grpc::ClientContext ctx;
  sandbox::v1::DownloadFileRequest req;
  req.set_session_id("s-nonexistent");
  req.set_path("x");
  auto reader = stub_->DownloadFile(&ctx, req);
  FileChunk c;
  while (reader->Read(&c)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Download("missing.txt", &got).error_code(), grpc::StatusCode::NOT_FOUND);
  Finished f = RunCode(*stub_, session_, "import os\nos.mkdir('/workspace/dir')");
  ASSERT_EQ(f.status(), Finished::OK);
  EXPECT_EQ(Download("dir", &got).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // An upload stream that does not start with `start`.
  grpc::ClientContext uctx;
  FileInfo info;
  auto writer = stub_->UploadFile(&uctx, &info);
  UploadFileRequest data;
  data.set_data("no start");
  writer->Write(data);
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("start"), std::string::npos) << st.error_message();
  sandbox::v1::ListFilesResponse list;
  EXPECT_EQ(List("", &list, 100000).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectSessionAlive();
}

TEST_F(FilesTest, ACancelledUploadLeavesNothingUnderTheName) {
  ASSERT_TRUE(Upload("keep.txt", "old").ok());
  grpc::ClientContext ctx;
  FileInfo info;
  auto writer = stub_->UploadFile(&ctx, &info);
  UploadFileRequest start;
  start.mutable_start()->set_session_id(session_);
  start.mutable_start()->set_path("keep.txt");
  writer->Write(start);
  UploadFileRequest m;
  m.set_data("partial new contents");
  writer->Write(m);
  ctx.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  std::string got;
  ASSERT_TRUE(Download("keep.txt", &got).ok());
  EXPECT_EQ(got, "old");
  // The server hears of the cancel on its own time: wait for the abort to land.
  Finished f = RunCode(*stub_, session_, R"py(
import os, time
for _ in range(100):
    if sorted(os.listdir('/workspace')) == ['keep.txt']:
        break
    time.sleep(0.05)
sorted(os.listdir('/workspace'))
)py");
  EXPECT_EQ(f.result_repr(), "['keep.txt']") << "a temporary file was left behind";
}

}  // namespace
}  // namespace sandboxd::testing
