// Produced files: the walk of out/ and its bounds, the diff between walks, resource URIs
// (round trip, and every way a hostile URI could try to leave out/), MIME types.
#include "bridge/produced_files.h"

#include <malloc.h>

#include <algorithm>

#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using testing::FakeSandboxes;

// The walks here stand for no request, so most pass no cancel token (nullptr); the run's
// token is tested below and through RunCodeTool (workspace_resources_test.cc).
class ListOutTest : public ::testing::Test {
 protected:
  ListOutTest() { ref_ = *sandboxes_.CreateSession("o", "default", {}, {}, "python", ""); }
  std::vector<std::string> Paths(const OutListing& l) {
    std::vector<std::string> out;
    for (const OutFile& f : l.files) out.push_back(f.path);
    return out;
  }
  FakeSandboxes sandboxes_;
  SandboxRef ref_;
};

TEST_F(ListOutTest, AMissingOutDirectoryIsAnEmptyListing) {
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->files.empty());
  EXPECT_FALSE(l->truncated);
}

TEST_F(ListOutTest, WalksNestedDirectoriesAndSkipsFilesOutsideOut) {
  sandboxes_.PutFile(ref_.session_id, "out/chart.png", "png");
  sandboxes_.PutFile(ref_.session_id, "out/report/data.csv", "a,b\n");
  sandboxes_.PutFile(ref_.session_id, "out/report/deep/x.txt", "x");
  sandboxes_.PutFile(ref_.session_id, "in/secret.txt", "not produced");
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(Paths(*l), ::testing::ElementsAre("chart.png", "report/data.csv", "report/deep/x.txt"));
  EXPECT_EQ(l->files[1].size, 4u);
  EXPECT_GT(l->files[1].mtime_ms, 0);
  EXPECT_FALSE(l->truncated);
}

TEST_F(ListOutTest, EachBoundStopsTheWalkAndSaysSo) {
  for (int i = 0; i < 20; ++i) sandboxes_.PutFile(ref_.session_id, "out/f" + std::to_string(i), "x");
  sandboxes_.PutFile(ref_.session_id, "out/a/b/c/d/e.txt", "deep");
  OutLimits few_files;
  few_files.max_files = 5;
  int calls = sandboxes_.list_calls();
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, few_files, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->files.size(), 5u);
  EXPECT_TRUE(l->truncated);
  EXPECT_EQ(sandboxes_.list_calls() - calls, 1) << "full: out/a is not listed any more";

  OutLimits shallow;
  shallow.max_depth = 3;  // out/, out/a, out/a/b
  l = ListOut(sandboxes_, ref_, shallow, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->files.size(), 20u);
  EXPECT_TRUE(l->truncated);

  OutLimits one_dir;
  one_dir.max_directories = 1;
  const int calls_before = sandboxes_.list_calls();
  l = ListOut(sandboxes_, ref_, one_dir, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(sandboxes_.list_calls() - calls_before, 1);
  EXPECT_TRUE(l->truncated);
}

// Once the run's token is cancelled the walk lists nothing more: each ListFiles carries
// the token (sandboxd cancels the one in flight), and no directory is listed after it.
TEST_F(ListOutTest, ACancelledWalkListsNothingMore) {
  for (int i = 0; i < 5; ++i) sandboxes_.PutFile(ref_.session_id, absl::StrCat("out/d", i, "/f"), "x");
  auto cancel = std::make_shared<codemode::CancelToken>();
  sandboxes_.before_list = [&](const std::string&, std::shared_ptr<codemode::CancelToken> t) {
    EXPECT_EQ(t, cancel);
    cancel->Cancel("client cancelled");  // during the listing of out/
  };
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), cancel);
  EXPECT_TRUE(absl::IsCancelled(l.status())) << l.status();
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("client cancelled"));
  EXPECT_EQ(sandboxes_.list_calls(), 1);
  // Cancelled before it starts: nothing is listed at all.
  EXPECT_TRUE(absl::IsCancelled(ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), cancel).status()));
  EXPECT_EQ(sandboxes_.list_calls(), 1);
}

// A listing as hostile code answers it: `max_entries` entries of `type` under `dir`, each
// path padded to `path_bytes`.
sandbox::v1::ListFilesResponse HostileListing(const std::string& dir, uint32_t max_entries,
                                              sandbox::v1::FileType type, size_t path_bytes) {
  sandbox::v1::ListFilesResponse r;
  for (uint32_t i = 0; i < max_entries; ++i) {
    sandbox::v1::FileInfo* f = r.add_files();
    std::string path = absl::StrCat(dir, "/", i, "-");
    path.resize(std::max(path.size(), path_bytes), 'x');
    f->set_path(std::move(path));
    f->set_type(type);
    f->set_size(1);
  }
  return r;
}

// Heap bytes in use (glibc's count; 0 where a sanitizer's allocator does not keep it).
size_t HeapInUse() { return mallinfo2().uordblks; }

// The walk lists at most 64 directories, so it queues no more than it may still list: a
// sandbox answering every listing with 1,064 directories would otherwise have the walk
// queue all of them (64 x 1,064 paths; with 4 KiB paths ~300 MiB that stay).
TEST_F(ListOutTest, DirectoriesBeyondWhatTheWalkListsAreNeverQueued) {
  size_t base = 0, peak = 0;
  std::vector<std::string> listed;
  sandboxes_.list_answer = [&](const std::string& dir, uint32_t max_entries) {
    const size_t now = HeapInUse();  // the previous listing is freed by now
    if (listed.empty()) base = now;
    peak = std::max(peak, now);
    listed.push_back(dir);
    return HostileListing(dir, max_entries, sandbox::v1::FILE_TYPE_DIRECTORY, 200);
  };
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->truncated);
  EXPECT_EQ(listed.size(), 64u);
  EXPECT_LT(peak - base, 2u << 20) << "the walk held " << (peak - base) << " bytes between listings";
}

// Paths longer than max_path_bytes are never kept (nor queued), and the paths one walk
// keeps stay within max_bytes: otherwise 1,000 files of 4 KiB paths would stay in the
// binding and in every resources/list.
TEST_F(ListOutTest, LongPathsAndManyBytesOfPathsAreNotKept) {
  for (auto type : {sandbox::v1::FILE_TYPE_FILE, sandbox::v1::FILE_TYPE_DIRECTORY}) {
    sandboxes_.list_answer = [type](const std::string& dir, uint32_t max_entries) {
      return HostileListing(dir, max_entries, type, 4096);
    };
    absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_TRUE(l->files.empty());
    EXPECT_TRUE(l->truncated);
  }
  int calls = sandboxes_.list_calls();
  ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr).IgnoreError();
  EXPECT_EQ(sandboxes_.list_calls() - calls, 1) << "no 4 KiB directory was walked into";

  sandboxes_.list_answer = [](const std::string& dir, uint32_t max_entries) {
    return HostileListing(dir, max_entries, sandbox::v1::FILE_TYPE_FILE, 1000);
  };
  OutLimits limits;
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, limits, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  size_t bytes = 0;
  for (const OutFile& f : l->files) bytes += f.path.size();
  EXPECT_LE(bytes, limits.max_bytes);
  EXPECT_GT(l->files.size(), 200u) << "paths within the bounds are kept";
  EXPECT_TRUE(l->truncated);
}

// Found by out_listing_fuzzer: a listing naming one file twice (with another size) made
// the walk keep both, and a walk diffed against itself reported a change.
TEST_F(ListOutTest, AFileListedTwiceIsKeptOnce) {
  sandboxes_.list_answer = [](const std::string& dir, uint32_t) {
    sandbox::v1::ListFilesResponse r;
    for (int size : {1, 2}) {
      sandbox::v1::FileInfo* f = r.add_files();
      f->set_path(dir + "/twice.txt");
      f->set_type(sandbox::v1::FILE_TYPE_FILE);
      f->set_size(size);
    }
    return r;
  };
  absl::StatusOr<OutListing> l = ListOut(sandboxes_, ref_, {}, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->files.size(), 1u);
  EXPECT_EQ(l->files[0].size, 1u);
  EXPECT_TRUE(ChangedFiles(l->files, l->files).empty());
}

TEST(ChangedFilesTest, NewAndModifiedFilesOnly) {
  std::vector<OutFile> before = {{"a", 1, 10}, {"b", 2, 20}, {"c", 3, 30}};
  std::vector<OutFile> after = {{"a", 1, 10}, {"b", 2, 21}, {"bb", 5, 5}, {"c", 4, 30}};
  std::vector<OutFile> changed = ChangedFiles(before, after);
  ASSERT_EQ(changed.size(), 3u);
  EXPECT_EQ(changed[0].path, "b");   // newer mtime
  EXPECT_EQ(changed[1].path, "bb");  // new
  EXPECT_EQ(changed[2].path, "c");   // other size
  EXPECT_TRUE(ChangedFiles(after, after).empty());
  EXPECT_EQ(ChangedFiles({}, after).size(), 4u);
  EXPECT_TRUE(ChangedFiles(after, {}).empty()) << "a removed file is not a produced one";
}

TEST(OutFileUriTest, RoundTripsAnyPath) {
  for (const std::string path : {"chart.png", "report/data 2024.csv", "ünïcode/файл.txt",
                                 "100%/a+b=c?.txt", "x#y"}) {
    const std::string uri = OutFileUri("default", path);
    const std::string tail = uri.substr(std::string("sandbox://session/default/out/").size());
    EXPECT_EQ(tail.find_first_of(" ?#"), std::string::npos) << uri;
    absl::StatusOr<OutFileRef> ref = ParseOutFileUri(uri);
    ASSERT_TRUE(ref.ok()) << uri << ": " << ref.status();
    EXPECT_EQ(ref->session, "default");
    EXPECT_EQ(ref->path, path);
  }
  EXPECT_EQ(OutFileUri("s-1", "a b/c.png"), "sandbox://session/s-1/out/a%20b/c.png");
  EXPECT_EQ(OutUriTemplate("s-1"), "sandbox://session/s-1/out/{+path}");
}

TEST(OutFileUriTest, TheLongestPathRoundTripsEvenWhenEveryByteIsEscaped) {
  // Raw control bytes are read as themselves but written as %XX: a URI a client sends near
  // the length cap must still fit once this server writes it back.
  const std::string handle = "sbx1_" + std::string(kMaxHandleInUri - 5, 'h');
  const std::string path = "d/" + std::string(4094, '\x14');
  absl::StatusOr<OutFileRef> raw = ParseOutFileUri("sandbox://handle/" + handle + "/out/" + path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  absl::StatusOr<OutFileRef> again = ParseOutFileUri(OutFileUriOfHandle(raw->handle, raw->path));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->path, path);
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseOutFileUri("sandbox://handle/" + handle + "/out/" + path + "x").status()))
      << "a path of more than 4096 bytes is refused, however it is spelled";
}

TEST(OutFileUriTest, RefusesEveryWayOutOfOut) {
  const char* const kBad[] = {
      "file:///etc/passwd",
      "sandbox://session/default/in/secret.txt",        // not under out/
      "sandbox://session/default/out/",                 // names no file
      "sandbox://session/default/out/../in/secret.txt",
      "sandbox://session/default/out/a/../../in/x",
      "sandbox://session/default/out/%2e%2e/in/x",      // '..' once decoded
      "sandbox://session/default/out/%2E%2E%2Fin%2Fx",  // an encoded '../in/x'
      "sandbox://session/default/out/./a",
      "sandbox://session/default/out/a//b",
      "sandbox://session/default/out//etc/passwd",
      "sandbox://session/default/out/a%00.png",         // NUL
      "sandbox://session/default/out/a%zz",             // bad escape
      "sandbox://session/default/out/a%4",              // cut escape
      "sandbox://session/default/out/%ff%fe",           // not UTF-8
      "sandbox://session/default/out/a?x=1",
      "sandbox://session/default/out/a#frag",
      "sandbox://session/../out/a",                     // not a session name
      "sandbox://session/a%2Fb/out/c",
      "sandbox://session//out/a",
      "sandbox://session/default",
  };
  for (const char* uri : kBad) {
    absl::StatusOr<OutFileRef> ref = ParseOutFileUri(uri);
    EXPECT_TRUE(absl::IsInvalidArgument(ref.status())) << uri << " -> " << ref.status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseOutFileUri("sandbox://session/d/out/" + std::string(10000, 'a')).status()));
}

TEST(MimeTypeTest, ByExtensionCaseInsensitively) {
  EXPECT_EQ(MimeTypeForPath("a/chart.PNG"), "image/png");
  EXPECT_EQ(MimeTypeForPath("data.csv"), "text/csv");
  EXPECT_EQ(MimeTypeForPath("x.json"), "application/json");
  EXPECT_EQ(MimeTypeForPath("png"), "application/octet-stream");
  EXPECT_EQ(MimeTypeForPath("dir.png/blob"), "application/octet-stream");
  EXPECT_TRUE(IsTextMimeType("text/csv"));
  EXPECT_TRUE(IsTextMimeType("image/svg+xml"));
  EXPECT_FALSE(IsTextMimeType("image/png"));
  EXPECT_FALSE(IsTextMimeType("application/octet-stream"));
}

}  // namespace
}  // namespace gateway
