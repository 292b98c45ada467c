// The session records: DirRecordStore's all-or-nothing files, the record format read as
// damaged input, and SessionRecords' rule that only registered sessions have records.
#include "sandboxd/session_records.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fake_record_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/record_store.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

class DirRecordStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxrec-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(DirRecordStoreTest, PutReplacesListReadsDeleteRemoves) {
  DirRecordStore store(dir_);
  ASSERT_TRUE(store.Put("s-b", "two").ok());
  ASSERT_TRUE(store.Put("s-a", "one").ok());
  ASSERT_TRUE(store.Put("s-a", "uno").ok());
  EXPECT_EQ(ReadFile(store.PathOf("s-a")), "uno");
  auto all = store.List();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, ElementsAre(Pair("s-a", "uno"), Pair("s-b", "two")));
  EXPECT_TRUE(store.Delete("s-a").ok());
  EXPECT_TRUE(store.Delete("s-a").ok()) << "deleting a missing record is not an error";
  EXPECT_THAT(*store.List(), ElementsAre(Pair("s-b", "two")));
  EXPECT_EQ(fs::status(store.PathOf("s-b")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

// A crash between writing the temporary file and renaming it leaves the old record and
// a .tmp file: the old record stands and the leftover goes away.
TEST_F(DirRecordStoreTest, AWriteCutShortByACrashLeavesTheOldRecord) {
  DirRecordStore store(dir_);
  ASSERT_TRUE(store.Put("s-a", "old").ok());
  std::ofstream(store.PathOf("s-a") + ".tmp") << "{\"half";
  auto all = store.List();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(*all, ElementsAre(Pair("s-a", "old")));
  EXPECT_FALSE(fs::exists(store.PathOf("s-a") + ".tmp"));
}

TEST_F(DirRecordStoreTest, FailedWritesSayWhyAndKeepTheOldRecord) {
  DirRecordStore store(dir_);
  ASSERT_TRUE(store.Put("s-a", "old").ok());
  // Something in the way of the temporary file (here a directory) fails the write,
  // whoever runs the test.
  fs::create_directory(store.PathOf("s-a") + ".tmp");
  absl::Status st = store.Put("s-a", "new");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(st.message()), HasSubstr("Is a directory"));
  EXPECT_EQ(ReadFile(store.PathOf("s-a")), "old");

  DirRecordStore missing(dir_ + "/nonexistent");
  EXPECT_FALSE(missing.List().ok());
  EXPECT_FALSE(missing.Put("s-a", "x").ok());
}

TEST_F(DirRecordStoreTest, KeysThatAreNotPlainNamesAreRefused) {
  DirRecordStore store(dir_);
  for (const char* key : {"", "../escape", "a/b", ".hidden", "s a", "s\n"}) {
    EXPECT_EQ(store.Put(key, "x").code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(store.Delete(key).code(), absl::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_FALSE(fs::exists(fs::path(dir_).parent_path() / "escape.json"));
  // Files that are not records are not listed.
  std::ofstream(dir_ + "/notes.txt") << "x";
  std::ofstream(dir_ + "/bad key.json") << "x";
  EXPECT_TRUE(store.List()->empty());
}

SessionRecord MakeRecord(const std::string& id, const std::string& server = "srv") {
  SessionRecord r;
  r.session.set_id(id);
  r.session.set_owner("alice");
  r.catalog.add_servers()->set_name(server);
  r.container_name = "sbx-" + id;
  return r;
}

TEST(SessionRecordFormatTest, RoundTripsAndRefusesDamagedRecords) {
  absl::StatusOr<SessionRecord> back = DecodeSessionRecord(EncodeSessionRecord(MakeRecord("s-1")));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->session.id(), "s-1");
  EXPECT_EQ(back->session.owner(), "alice");
  EXPECT_EQ(back->catalog.servers(0).name(), "srv");
  EXPECT_EQ(back->container_name, "sbx-s-1");

  for (const std::string& bad : std::vector<std::string>{"", "{\"sess", "[]", "42", "{\"session\":1,\"catalog\":\"{}\",\"container_name\":\"c\"}",
        "{\"session\":\"{}\",\"catalog\":\"{}\"}",
        "{\"session\":\"{}\",\"catalog\":\"{}\",\"container_name\":\"\"}",
        "{\"session\":\"not json\",\"catalog\":\"{}\",\"container_name\":\"c\"}",
        "{\"session\":\"{\\\"id\\\":7}\",\"catalog\":\"{}\",\"container_name\":\"c\"}",
        std::string(100000, '[')}) {
    absl::StatusOr<SessionRecord> r = DecodeSessionRecord(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad.substr(0, 80);
  }
}

// The egress count comes back as written; damage reads as the most there is (the quota,
// capping it at its limit, is then spent), never as a refilled quota or an error.
TEST(SessionRecordFormatTest, TheEgressCountRoundTripsAndDamageSpendsIt) {
  SessionRecord r = MakeRecord("s-1");
  r.egress_bytes_used = (uint64_t{5} << 30) + 7;
  absl::StatusOr<SessionRecord> back = DecodeSessionRecord(EncodeSessionRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->egress_bytes_used, (uint64_t{5} << 30) + 7);
  r.egress_bytes_used = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(DecodeSessionRecord(EncodeSessionRecord(r))->egress_bytes_used,
            std::numeric_limits<uint64_t>::max());

  const std::string head = R"({"session":"{\"id\":\"s-1\"}","catalog":"{}","container_name":"c")";
  absl::StatusOr<SessionRecord> older = DecodeSessionRecord(head + "}");
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->egress_bytes_used, 0u) << "a record without a count";
  for (const std::string& bad : {"-1", "1.5", "1e300", "18446744073709551616", "\"12\"", "null",
                                 "true", "[1]", "{}"}) {
    absl::StatusOr<SessionRecord> damaged =
        DecodeSessionRecord(absl::StrCat(head, R"(,"egress_bytes_used":)", bad, "}"));
    ASSERT_TRUE(damaged.ok()) << bad << ": " << damaged.status();
    EXPECT_EQ(damaged->egress_bytes_used, std::numeric_limits<uint64_t>::max()) << bad;
  }
}

// The sandbox's init noted at its start comes back as written; a record without one (an
// older version's) or with anything but two positive integers has none.
TEST(SessionRecordFormatTest, TheNotedInitRoundTripsAndDamageIsNone) {
  SessionRecord r = MakeRecord("s-1");
  r.init = ProcessRef{4242, 987654321};
  absl::StatusOr<SessionRecord> back = DecodeSessionRecord(EncodeSessionRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->init.has_value());
  EXPECT_EQ(back->init->pid, 4242);
  EXPECT_EQ(back->init->start_time, 987654321u);
  r.init.reset();
  EXPECT_FALSE(DecodeSessionRecord(EncodeSessionRecord(r))->init.has_value());

  const std::string head = R"({"session":"{\"id\":\"s-1\"}","catalog":"{}","container_name":"c")";
  for (const std::string& bad :
       {R"("init_pid":0,"init_start_time":5)", R"("init_pid":-3,"init_start_time":5)",
        R"("init_pid":4294967296,"init_start_time":5)", R"("init_pid":7,"init_start_time":0)",
        R"("init_pid":"7","init_start_time":5)", R"("init_pid":7.5,"init_start_time":5)",
        R"("init_pid":7)", R"("init_start_time":5)", R"("init_pid":null,"init_start_time":5)"}) {
    absl::StatusOr<SessionRecord> damaged = DecodeSessionRecord(absl::StrCat(head, ",", bad, "}"));
    ASSERT_TRUE(damaged.ok()) << bad << ": " << damaged.status();
    EXPECT_FALSE(damaged->init.has_value()) << bad;
  }
}

TEST(SessionRecordsTest, OnlyRegisteredSessionsHaveRecords) {
  FakeRecordStore store;
  SessionRecords records(&store);
  ASSERT_TRUE(records.Add("s-1", [] { return MakeRecord("s-1"); }).ok());
  ASSERT_TRUE(records.Update("s-1", [] { return MakeRecord("s-1", "next"); }).ok());
  EXPECT_THAT(*store.Get("s-1"), HasSubstr("next"));

  // A catalog change that lands after DeleteSession must not bring the record back.
  ASSERT_TRUE(records.Remove("s-1").ok());
  ASSERT_TRUE(records.Update("s-1", [] { return MakeRecord("s-1", "late"); }).ok());
  EXPECT_FALSE(store.Get("s-1"));
  EXPECT_TRUE(records.Update("s-unknown", [] { return MakeRecord("s-unknown"); }).ok());
  EXPECT_EQ(store.size(), 0u);
}

TEST(SessionRecordsTest, AFailedAddRegistersNothing) {
  FakeRecordStore store;
  SessionRecords records(&store);
  store.FailPuts(absl::ResourceExhaustedError("No space left on device"));
  absl::Status st = records.Add("s-1", [] { return MakeRecord("s-1"); });
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  store.FailPuts(absl::OkStatus());
  ASSERT_TRUE(records.Update("s-1", [] { return MakeRecord("s-1"); }).ok());
  EXPECT_EQ(store.size(), 0u);
}

TEST(SessionRecordsTest, LoadSeparatesGoodRecordsFromBrokenOnes) {
  FakeRecordStore store;
  SessionRecords records(&store);
  ASSERT_TRUE(store.Put("s-good", EncodeSessionRecord(MakeRecord("s-good"))).ok());
  store.Corrupt("s-torn", "{\"session\":\"{\\\"id");
  ASSERT_TRUE(store.Put("s-other", EncodeSessionRecord(MakeRecord("s-elsewhere"))).ok());
  absl::StatusOr<SessionRecords::Loaded> loaded = records.Load();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].session.id(), "s-good");
  EXPECT_THAT(loaded->broken, ElementsAre(Pair("s-other", HasSubstr("another session")),
                                          Pair("s-torn", "unreadable record")));
  // Loaded records are not registered until adopted.
  ASSERT_TRUE(records.Update("s-good", [] { return MakeRecord("s-good", "next"); }).ok());
  EXPECT_THAT(*store.Get("s-good"), Not(HasSubstr("next")));
  records.Adopt("s-good");
  ASSERT_TRUE(records.Update("s-good", [] { return MakeRecord("s-good", "next"); }).ok());
  EXPECT_THAT(*store.Get("s-good"), HasSubstr("next"));

  store.FailList(absl::InternalError("Input/output error"));
  EXPECT_EQ(records.Load().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace sandboxd::testing
