// WorkspaceFiles and the file frames on their own: a fake runner (the `send` callback
// records frames; tests answer with OnReply) sends what a hostile sandbox could.
#include "sandboxd/workspace_files.h"

#include <atomic>
#include <thread>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/frame.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// The length prefix of an encoded frame.
size_t ReadFrameLength(const std::string& f) {
  size_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(f[i]);
  return n;
}

class WorkspaceFilesTest : public ::testing::Test {
 protected:
  absl::Status Record(std::string_view f) {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(f.size(), ReadFrameLength(std::string(f)) + 4);
    sent_.push_back(json::parse(f.substr(4)));
    return absl::OkStatus();
  }
  WorkspaceFiles files_{[this](std::string f) { return Record(f); },
                        [this](std::string_view f) { return Record(f); },
                        /*max_file_bytes=*/100, /*binary_chunks=*/false};

  std::vector<json> Sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  static FileReplyMessage Reply(FileReplyMessage::Kind kind, uint64_t id) {
    FileReplyMessage m;
    m.kind = kind;
    m.id = id;
    return m;
  }
  static FileReplyMessage Error(uint64_t id, std::string code, std::string message) {
    FileReplyMessage m = Reply(FileReplyMessage::Kind::kError, id);
    m.code = std::move(code);
    m.message = std::move(message);
    return m;
  }

  std::mutex mu_;
  std::vector<json> sent_;
  std::string scratch_;  // SendChunk's frame buffer
};

TEST_F(WorkspaceFilesTest, UploadSendsFramesAndCommitWaitsForTheRunner) {
  absl::StatusOr<uint64_t> id = files_.BeginUpload("out/a.txt");
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(files_.SendChunk(*id, "hello", &scratch_).ok());
  std::thread runner([&] {
    while (Sent().size() < 3) std::this_thread::yield();
    FileReplyMessage w = Reply(FileReplyMessage::Kind::kWritten, *id);
    w.size = 999;  // what the sandbox claims does not matter: we know what we sent
    files_.OnReply(w);
  });
  absl::StatusOr<FileEntry> written = files_.Commit(*id, absl::Seconds(10));
  runner.join();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->size, 5u);
  std::vector<json> sent = Sent();
  EXPECT_EQ(sent[0]["type"], "file_upload");
  EXPECT_EQ(sent[0]["path"], "out/a.txt");
  EXPECT_EQ(sent[0]["max_bytes"], 100);
  EXPECT_EQ(sent[1]["data"], absl::Base64Escape("hello"));
  EXPECT_EQ(sent[2]["type"], "file_commit");
  EXPECT_FALSE(files_.busy());
}

TEST_F(WorkspaceFilesTest, AnEarlyRunnerErrorEndsTheUpload) {
  uint64_t id = *files_.BeginUpload("a");
  files_.OnReply(Error(id, "resource_exhausted", "the workspace is full"));
  absl::Status s = files_.SendChunk(id, "x", &scratch_);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("full"));
  EXPECT_FALSE(files_.busy());
}

TEST_F(WorkspaceFilesTest, OverTheCapIsRefusedHereAndAborted) {
  uint64_t id = *files_.BeginUpload("a");
  ASSERT_TRUE(files_.SendChunk(id, std::string(60, 'x'), &scratch_).ok());
  EXPECT_EQ(files_.SendChunk(id, std::string(41, 'x'), &scratch_).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Sent().back()["type"], "file_abort");
}

TEST_F(WorkspaceFilesTest, PathsAreCheckedBeforeTheyReachTheRunner) {
  const std::vector<std::string> bad_paths = {"/etc/passwd", "../x", "a/../../x", "",
                                              std::string("a\0b", 3), std::string("\xff\xfe", 2),
                                              std::string(5000, 'a')};
  for (const std::string& bad : bad_paths) {
    EXPECT_EQ(files_.BeginUpload(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(Sent().empty());
  EXPECT_TRUE(CheckWorkspacePath("", /*allow_empty=*/true).ok());
  EXPECT_TRUE(CheckWorkspacePath("./a/./b..c", false).ok());
}

TEST_F(WorkspaceFilesTest, DownloadStreamsChunksAndChecksWhatTheSandboxClaims) {
  std::string got;
  std::thread runner([&] {
    while (Sent().empty()) std::this_thread::yield();
    uint64_t id = Sent()[0]["id"];
    FileReplyMessage d = Reply(FileReplyMessage::Kind::kData, id);
    d.data = "abc";
    files_.OnReply(d);
    d.data = "de";
    files_.OnReply(d);
    FileReplyMessage r = Reply(FileReplyMessage::Kind::kRead, id);
    r.size = 4;  // a lie: 5 bytes came
    files_.OnReply(r);
  });
  absl::StatusOr<FileEntry> read = files_.Download(
      "f", [&](std::string_view c) { got += c; return true; }, absl::Seconds(10));
  runner.join();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("announced 4 bytes and sent 5"));
}

TEST_F(WorkspaceFilesTest, ADownloadOverTheCapStopsAtTheCap) {
  std::thread runner([&] {
    while (Sent().empty()) std::this_thread::yield();
    uint64_t id = Sent()[0]["id"];
    FileReplyMessage d = Reply(FileReplyMessage::Kind::kData, id);
    d.data = std::string(60, 'x');
    files_.OnReply(d);
    files_.OnReply(d);  // 120 > 100
  });
  size_t got = 0;
  absl::StatusOr<FileEntry> read = files_.Download(
      "f", [&](std::string_view c) { got += c.size(); return true; }, absl::Seconds(10));
  runner.join();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LE(got, 100u);
  EXPECT_FALSE(files_.busy());
}

TEST_F(WorkspaceFilesTest, ListingsLongerThanAskedForAreRefused) {
  std::thread runner([&] {
    while (Sent().empty()) std::this_thread::yield();
    FileReplyMessage l = Reply(FileReplyMessage::Kind::kList, Sent()[0]["id"]);
    l.entries.resize(3);
    files_.OnReply(l);
  });
  auto listing = files_.List("", 2, absl::Seconds(10));
  runner.join();
  EXPECT_EQ(listing.status().code(), absl::StatusCode::kInternal);
}

// The runner is untrusted (sandboxed code can answer file_list frames itself): a listing
// may only name direct children of the listed directory, each name at most NAME_MAX, so
// a reply of 1,000 entries of 4 KiB paths never reaches a client.
TEST_F(WorkspaceFilesTest, ListingsMayOnlyNameChildrenOfTheListedDirectory) {
  auto list = [&](const std::string& dir, std::vector<std::string> paths) {
    const size_t before = Sent().size();
    std::thread runner([&] {
      while (Sent().size() == before) std::this_thread::yield();
      FileReplyMessage l = Reply(FileReplyMessage::Kind::kList, Sent().back()["id"]);
      for (const std::string& p : paths) l.entries.push_back({p, FileEntry::Type::kDirectory, 0, 0});
      files_.OnReply(l);
    });
    auto listing = files_.List(dir, 100, absl::Seconds(10));
    runner.join();
    return listing.status();
  };
  EXPECT_TRUE(list("out", {"out/a.txt", "out/" + std::string(255, 'n')}).ok());
  EXPECT_TRUE(list("./out/", {"out/a"}).ok());
  EXPECT_TRUE(list("", {"out", "in"}).ok());
  EXPECT_TRUE(list("out/d", {"out/d/x"}).ok());
  for (const std::string& bad : {"out/" + std::string(4092, 'd'), "out/" + std::string(256, 'n'),
                                 std::string("in/a"), std::string("out/a/b"), std::string("out/"),
                                 std::string("out/.."), std::string("outx"), std::string("a")}) {
    absl::Status s = list("out", {"out/ok", bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << bad.substr(0, 40);
    EXPECT_THAT(s.message(), HasSubstr("not a child")) << bad.substr(0, 40);
  }
  EXPECT_FALSE(files_.busy());
}

TEST_F(WorkspaceFilesTest, ALostSessionFailsOpenAndLaterTransfers) {
  uint64_t id = *files_.BeginUpload("a");
  std::thread loser([&] {
    while (Sent().size() < 2) std::this_thread::yield();
    files_.Fail("session lost: out of memory");
  });
  ASSERT_TRUE(files_.SendChunk(id, "x", &scratch_).ok());
  absl::StatusOr<FileEntry> c = files_.Commit(id, absl::Seconds(10));
  loser.join();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("out of memory"));
  EXPECT_EQ(files_.BeginUpload("b").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(WorkspaceFilesTest, ASilentSandboxTimesOutAndTheUploadIsAborted) {
  uint64_t id = *files_.BeginUpload("a");
  EXPECT_EQ(files_.Commit(id, absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Sent().back()["type"], "file_abort");
  // A late reply for the finished transfer is dropped.
  files_.OnReply(Reply(FileReplyMessage::Kind::kWritten, id));
  EXPECT_FALSE(files_.busy());
}

// A silent sandbox and a caller that went away (its rpc was cancelled): every wait ends
// after one poll, not at its timeout of an hour, and nothing of the transfer stays.
TEST_F(WorkspaceFilesTest, WaitsEndWhenTheCallerGoesAway) {
  std::atomic<int> asked{0};
  WorkspaceFiles::Cancelled gone = [&] { return ++asked > 0; };
  absl::StatusOr<FileEntry> read = files_.Download(
      "out/a", [](std::string_view) { return true; }, absl::Hours(1), gone);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kCancelled) << read.status();
  absl::StatusOr<WorkspaceFiles::Listing> listed = files_.List("", 10, absl::Hours(1), gone);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kCancelled) << listed.status();
  uint64_t id = *files_.BeginUpload("a");
  EXPECT_EQ(files_.Commit(id, absl::Hours(1), gone).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(Sent().back()["type"], "file_abort");  // the upload's temporary file goes
  EXPECT_EQ(asked.load(), 3);
  EXPECT_FALSE(files_.busy());
}

TEST(FileFramesTest, HostileRepliesAreProtocolViolations) {
  const char* bad[] = {
      R"({"type":"file_data","id":1,"data":"!!not base64"})",
      R"({"type":"file_data","id":1})",
      R"({"type":"file_read","id":1,"size":-1})",
      R"({"type":"file_error","id":1})",
      R"({"type":"file_list_result","id":1,"entries":{}})",
      R"({"type":"file_list_result","id":1,"entries":[{"path":"a","type":"weird","size":1}]})",
      R"({"type":"file_list_result","id":1,"entries":[7]})",
      R"({"type":"file_written","id":"1","size":1})",
      R"({"type":"file_surprise","id":1})",
  };
  for (const char* text : bad) {
    absl::StatusOr<RunnerMessage> m = ParseRunnerMessage(json::parse(text));
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  json many = {{"type", "file_list_result"}, {"id", 1}, {"entries", json::array()}};
  for (uint32_t i = 0; i <= kMaxListEntries; ++i) {
    many["entries"].push_back({{"path", "a"}, {"type", "file"}, {"size", 1}});
  }
  EXPECT_FALSE(ParseRunnerMessage(many).ok());
  absl::StatusOr<RunnerMessage> ok = ParseRunnerMessage(json::parse(
      R"({"type":"file_error","id":3,"code":"not_found","message":"x: no such file"})"));
  ASSERT_TRUE(ok.ok());
  const auto& e = std::get<FileReplyMessage>(*ok);
  EXPECT_EQ(FileErrorStatus(e).code(), absl::StatusCode::kNotFound);
  FileReplyMessage odd = e;
  odd.code = "made_up";
  EXPECT_EQ(FileErrorStatus(odd).code(), absl::StatusCode::kInternal);
}

// The runner's file_data layout is decoded without a JSON DOM; anything else, even
// equivalent JSON, goes through the general parser, which has the last word.
TEST(FileFramesTest, FileDataFastPathTakesOnlyTheExactLayout) {
  const std::string bytes("\x00\xff" "binary\x01", 9);
  const std::string b64 = absl::Base64Escape(bytes);
  std::optional<FileReplyMessage> m =
      ParseFileDataFrame(R"({"type":"file_data","id":42,"data":")" + b64 + R"("})");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, FileReplyMessage::Kind::kData);
  EXPECT_EQ(m->id, 42u);
  EXPECT_EQ(m->data, bytes);
  for (const std::string& other : std::vector<std::string>{
           R"({"type":"file_data", "id":42,"data":")" + b64 + R"("})",   // spacing
           R"({"id":42,"type":"file_data","data":")" + b64 + R"("})",    // key order
           R"({"type":"file_data","id":042,"data":")" + b64 + R"("})",   // leading zero
           R"({"type":"file_data","id":-1,"data":")" + b64 + R"("})",
           R"({"type":"file_data","id":99999999999999999999,"data":"AAAA"})",
           R"({"type":"file_data","id":1,"data":"AA\u0041A"})",         // an escape
           R"({"type":"file_data","id":1,"data":"AA AA"})",
           R"({"type":"file_data","id":1,"data":"A"})",                  // bad base64
           R"({"type":"file_data","id":1,"data":"AAAA"},"x":1})",
           std::string(R"({"type":"file_data","id":1,"data":"AAAA"})") + " "}) {
    EXPECT_FALSE(ParseFileDataFrame(other)) << other;
  }
  // Through the decoder both roads give the same message, and hostile variants still fail.
  FrameDecoder dec(kMaxRunnerFrameBytes);
  for (const std::string& body : std::vector<std::string>{R"({"type":"file_data","id":7,"data":")" + b64 + R"("})",
                                  R"({"id":7,"data":")" + b64 + R"(","type":"file_data"})",
                                  std::string(R"({"type":"file_data","id":7,"data":"A"})")}) {
    std::string frame = EncodeFrame(nlohmann::json::parse(body));
    dec.Append(frame.data(), frame.size());
  }
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::optional<RunnerMessage>> got = dec.NextMessage();
    ASSERT_TRUE(got.ok() && *got) << got.status();
    const auto& reply = std::get<FileReplyMessage>(**got);
    EXPECT_EQ(reply.id, 7u);
    EXPECT_EQ(reply.data, bytes);
  }
  absl::StatusOr<std::optional<RunnerMessage>> bad = dec.NextMessage();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not base64"));
}

TEST(FileFramesTest, ChunkFramesAreTheJsonTheyStandFor) {
  const std::string bytes("\x00\x01\x02" "hello\xff", 9);
  std::string frame = EncodeFileChunkFrame(5, bytes);
  ASSERT_EQ(frame.size(), ReadFrameLength(frame) + 4);
  EXPECT_EQ(nlohmann::json::parse(frame.substr(4)),
            (nlohmann::json{{"type", "file_chunk"}, {"id", 5}, {"data", absl::Base64Escape(bytes)}}));
}

TEST(FileFramesTest, BinaryChunksAreTheIdThenTheRawBytes) {
  std::string buffer;
  for (int len : {3000, 5, 0}) {
    const std::string bytes(len, '\xfe');
    EncodeBinaryFileChunkInto(0x0102030405060708u, bytes, &buffer);
    ASSERT_EQ(buffer.size(), 4u + 8u + len);
    EXPECT_EQ(ReadFrameLength(buffer), kBinaryFrameBit | (8u + len)) << "the top bit marks it";
    EXPECT_EQ(buffer.substr(4, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
    EXPECT_EQ(buffer.substr(12), bytes);
  }
}

TEST(FileFramesTest, ARunnerCannotSendABinaryFrame) {
  // Only sandboxd sends them: from a runner the top bit is a frame far over the cap.
  FrameDecoder dec(kMaxRunnerFrameBytes);
  std::string frame;
  EncodeBinaryFileChunkInto(1, "data", &frame);
  dec.Append(frame.data(), frame.size());
  EXPECT_FALSE(dec.NextMessage().ok());
}

TEST(WorkspaceFilesBinaryTest, RunnersOfVersionTwoGetBinaryChunks) {
  std::vector<std::string> bulk;
  WorkspaceFiles files([](std::string) { return absl::OkStatus(); },
                       [&](std::string_view f) {
                         bulk.emplace_back(f);
                         return absl::OkStatus();
                       },
                       100, /*binary_chunks=*/true);
  absl::StatusOr<uint64_t> id = files.BeginUpload("a.bin");
  ASSERT_TRUE(id.ok());
  std::string scratch;
  ASSERT_TRUE(files.SendChunk(*id, std::string("\0raw\xff", 5), &scratch).ok());
  ASSERT_EQ(bulk.size(), 1u);
  EXPECT_EQ(ReadFrameLength(bulk[0]), kBinaryFrameBit | 13u);
  EXPECT_EQ(bulk[0].substr(12), std::string("\0raw\xff", 5));
  EXPECT_EQ(files.SendChunk(*id, std::string(96, 'x'), &scratch).code(),
            absl::StatusCode::kResourceExhausted) << "the cap counts raw bytes either way";
}

TEST(FileFramesTest, ChunkFramesEncodeEveryLengthIntoAReusedBuffer) {
  std::string buffer;
  // Longest first: each shorter frame must come out exact in the same buffer.
  for (int len : {3000, 1024, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}) {
    std::string bytes;
    for (int i = 0; i < len; ++i) bytes.push_back(static_cast<char>((i * 37 + len) & 0xff));
    EncodeFileChunkFrameInto(len + 1u, bytes, &buffer);
    ASSERT_EQ(buffer.size(), ReadFrameLength(buffer) + 4) << len;
    nlohmann::json frame = nlohmann::json::parse(buffer.substr(4));
    EXPECT_EQ(frame["data"], absl::Base64Escape(bytes)) << len;
    EXPECT_EQ(frame["id"], len + 1) << len;
  }
}

}  // namespace
}  // namespace sandboxd
