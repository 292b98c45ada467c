// MessageIdScanner: the id of a response found in its bytes, whatever their order and
// however they are split, without keeping the message.
#include "upstream/message_id.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;

// A scanner fed `text` in pieces of `piece` bytes.
MessageIdScanner Scanned(const std::string& text, size_t piece) {
  MessageIdScanner scanner;
  for (size_t i = 0; i < text.size(); i += piece) {
    scanner.Feed(text.data() + i, std::min(piece, text.size() - i));
  }
  return scanner;
}

json Scan(const std::string& text, size_t piece = 1) { return Scanned(text, piece).id(); }

TEST(MessageIdScannerTest, FindsTheIdBeforeOrAfterAHugeResult) {
  const std::string big(1 << 20, 'A');
  const std::string first = R"({"jsonrpc":"2.0","id":7,"result":{"text":")" + big + R"("}})";
  // The TypeScript SDK writes the id last.
  const std::string last = R"({"result":{"content":[{"text":")" + big + R"("}]},"jsonrpc":"2.0", "id" : "r-9"})";
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}}) {
    EXPECT_EQ(Scan(first, piece), json(7));
    EXPECT_EQ(Scan(last, piece), json("r-9"));
  }
}

TEST(MessageIdScannerTest, IgnoresIdsInsideValuesAndStrings) {
  EXPECT_EQ(Scan(R"({"result":{"id":5},"note":"\"id\":6","id":8})"), json(8));
  EXPECT_EQ(Scan(R"({"result":{"id":5}})"), json(nullptr));
  EXPECT_EQ(Scan(R"(["id",5])"), json(nullptr));
}

TEST(MessageIdScannerTest, AnIncompleteOrOddIdIsNone) {
  EXPECT_EQ(Scan(R"({"id":12)"), json(nullptr));  // not ended yet
  EXPECT_EQ(Scan(R"({"id":{"a":1},"result":1})"), json(nullptr));
  EXPECT_EQ(Scan(R"({"id":1.5,"result":1})"), json(nullptr));
  EXPECT_EQ(Scan(R"({"id":")" + std::string(1000, 'x') + R"(","result":1})"), json(nullptr));
}

TEST(MessageIdScannerTest, ARequestOfTheServersIsNoAnswer) {
  EXPECT_EQ(Scan(R"({"id":3,"method":"sampling/createMessage","params":{}})"), json(nullptr));
}

// A JSON parser reads "\u0069d" as "id": so must the scanner, or an oversized answer with
// such a key leaves its call waiting out --call_timeout.
TEST(MessageIdScannerTest, KeysSpelledWithEscapesAreDecoded) {
  const std::string big(1 << 16, 'A');
  EXPECT_EQ(Scan(R"({"result":{"text":")" + big + R"("},"\u0069d":11})", 3), json(11));
  EXPECT_EQ(Scan(R"({"\u0069\u0064":"x"})"), json("x"));
  EXPECT_EQ(Scan(R"({"id":4,"\u006dethod":"ping"})"), json(nullptr));
  EXPECT_EQ(Scan(R"({"i\"d":4})"), json(nullptr));
  EXPECT_EQ(Scan(R"({"\u00":4})"), json(nullptr));  // a broken escape is no key of ours
}

std::vector<json> ScanIds(const std::string& text, size_t piece = 1) {
  return Scanned(text, piece).ids();
}

// A batch line refused or too large fails its requests at once; otherwise they would wait
// out their timeout.
TEST(MessageIdScannerTest, FindsTheIdsOfTheResponsesInABatch) {
  const std::string big(1 << 16, 'A');
  const std::string batch = R"([{"jsonrpc":"2.0","id":1,"result":{"t":")" + big +
                            R"("}}, {"result":{"id":99},"id":"two"},)"
                            R"({"id":3,"method":"ping"}, {"method":"notifications/progress",)"
                            R"("params":{"id":4}}, {"error":{"code":1},"\u0069d":5}])";
  for (size_t piece : {size_t{1}, size_t{5}, size_t{4096}}) {
    EXPECT_EQ(ScanIds(batch, piece), (std::vector<json>{1, "two", 5})) << piece;
  }
  EXPECT_EQ(Scan(batch), json(nullptr)) << "a batch has no single id";
  EXPECT_EQ(ScanIds(R"({"id":7,"result":1})"), std::vector<json>{7});
  EXPECT_TRUE(ScanIds(R"(["id",5,{"id":6)").empty()) << "an element not ended answers nothing yet";
}

TEST(MessageIdScannerTest, ABatchNamesAtMostItsFirstThousandIds) {
  std::string batch = "[";
  for (int i = 0; i < 5000; ++i) batch += (i ? "," : "") + std::string(R"({"result":0,"id":)") + std::to_string(i) + "}";
  batch += "]";
  const std::vector<json> ids = ScanIds(batch, 4096);
  ASSERT_EQ(ids.size(), 1024u);
  EXPECT_EQ(ids.back(), json(1023));
}

// 1,024 answers to requests never made, first, do not hide the real one.
TEST(MessageIdScannerTest, ABatchNamesOnlyTheIdsItIsAskedFor) {
  std::string batch = "[";
  for (int i = 0; i < 5000; ++i) batch += std::string(R"({"result":0,"id":)") + std::to_string(1000000 + i) + "},";
  batch += R"({"result":0,"id":3},{"result":0,"id":4}])";
  MessageIdScanner scanner([](const json& id) { return id == json(3); });
  for (int round = 0; round < 2; ++round) {  // the filter stays across Reset()
    scanner.Feed(batch.data(), batch.size());
    EXPECT_EQ(scanner.ids(), std::vector<json>{json(3)});
    scanner.Reset();
  }
}

TEST(MessageIdScannerTest, ResetStartsOver) {
  MessageIdScanner scanner;
  const std::string one = R"({"id":1,"result":{}})";
  scanner.Feed(one.data(), one.size());
  EXPECT_EQ(scanner.id(), json(1));
  scanner.Reset();
  const std::string two = R"({"result":{},"id":2})";
  scanner.Feed(two.data(), two.size());
  EXPECT_EQ(scanner.id(), json(2));
}

}  // namespace
}  // namespace gateway
