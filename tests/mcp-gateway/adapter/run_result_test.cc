// Unit tests of run_result.h: the text the model reads (sections, clipping, notes) and the
// structured twin that matches the outputSchema.
#include "adapter/run_result.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
using ::testing::HasSubstr;
using ::testing::Not;

Finished Ok(const std::string& out) {
  Finished f;
  f.set_status(Finished::OK);
  f.set_stdout(out);
  f.set_duration_ms(12);
  return f;
}

std::string TextOf(const json& result) { return result["content"][0]["text"]; }

TEST(ClipTest, KeepsHeadAndTail) {
  EXPECT_EQ(Clip("short", 10), "short");
  std::string clipped = Clip(std::string(600, 'h') + std::string(400, 't'), 300);
  EXPECT_THAT(clipped, HasSubstr("[... 700 bytes omitted ...]"));
  EXPECT_EQ(clipped.substr(0, 200), std::string(200, 'h'));
  EXPECT_EQ(clipped.substr(clipped.size() - 100), std::string(100, 't'));
}

// Code can raise an exception with a multi-MB message (or return a huge repr): the
// message, traceback and result are clipped with a visible marker in the text block and
// in structuredContent alike.
TEST(FormatRunResultTest, HugeErrorsAndResultsAreClippedEverywhere) {
  Finished f;
  f.set_status(Finished::ERROR);
  f.set_result_repr(std::string(3 << 20, 'r'));
  f.mutable_error()->set_type(std::string(1000, 'T'));
  f.mutable_error()->set_message(std::string(3 << 20, 'm'));
  f.mutable_error()->set_traceback(std::string(3 << 20, 't'));
  const size_t max = 64 * 1024;
  json r = FormatRunResult(f, RunReport{}, max);
  EXPECT_LE(TextOf(r).size(), max + 2048);
  EXPECT_THAT(TextOf(r), HasSubstr("bytes omitted ...]"));
  const json& error = r["structuredContent"]["error"];
  const json& result = r["structuredContent"]["result"];
  for (const json* part : {&error["message"], &error["traceback"], &result}) {
    EXPECT_LE(part->get<std::string>().size(), max / 4 + 100);
    EXPECT_THAT(part->get<std::string>(), HasSubstr("bytes omitted ...]"));
  }
  EXPECT_LE(error["type"].get<std::string>().size(), 400u);
  EXPECT_LE(r.dump().size(), 200u * 1024) << "the whole result stays near the text budget";
}

TEST(FormatRunResultTest, OutputResultAndStructuredContent) {
  Finished f = Ok("hello\n");
  f.set_stderr("warning");
  f.set_result_repr("42");
  RunReport report;
  report.session = "side";
  json r = FormatRunResult(f, report, 64 * 1024);
  EXPECT_EQ(TextOf(r), "hello\n[stderr]\nwarning\n[result] 42\n");
  EXPECT_EQ(r["isError"], false);
  const json& s = r["structuredContent"];
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(s["stdout"], "hello\n");
  EXPECT_EQ(s["result"], "42");
  EXPECT_TRUE(s["error"].is_null());
  EXPECT_EQ(s["duration_ms"], 12);
  EXPECT_EQ(s["session"], "side");
  EXPECT_TRUE(s["note"].is_null());
  const json schema = RunResultSchema();
  for (const auto& field : schema["required"]) {
    EXPECT_TRUE(s.contains(field.get<std::string>())) << field;
  }
  for (const auto& [field, _] : s.items()) {
    EXPECT_TRUE(schema["properties"].contains(field)) << "undeclared " << field;
  }
}

TEST(FormatRunResultTest, NoOutputSaysSo) {
  EXPECT_EQ(TextOf(FormatRunResult(Ok(""), {}, 1024)), "(no output)");
}

TEST(FormatRunResultTest, ErrorsShowTypeMessageAndTraceback) {
  Finished f = Ok("");
  f.set_status(Finished::TIMEOUT);
  f.mutable_error()->set_type("TimeoutError");
  f.mutable_error()->set_message("execution exceeded 1 s");
  f.mutable_error()->set_traceback("Traceback: line 1\n");
  json r = FormatRunResult(f, {}, 1024);
  EXPECT_EQ(r["isError"], true);
  EXPECT_EQ(TextOf(r), "[timeout] TimeoutError: execution exceeded 1 s\nTraceback: line 1\n");
  EXPECT_EQ(r["structuredContent"]["status"], "timeout");
  EXPECT_EQ(r["structuredContent"]["error"]["type"], "TimeoutError");
}

TEST(FormatRunResultTest, LongOutputIsClippedWithinTheBound) {
  Finished f = Ok(std::string(100000, 'o'));
  f.set_stderr(std::string(100000, 'e'));
  f.set_output_truncated(true);
  std::string text = TextOf(FormatRunResult(f, {}, 8192));
  EXPECT_LT(text.size(), 8192u);
  EXPECT_THAT(text, HasSubstr("bytes omitted"));
  EXPECT_THAT(text, HasSubstr("[note] output was truncated"));
  EXPECT_EQ(FormatRunResult(f, {}, 8192)["structuredContent"]["stdout"].get<std::string>().size(),
            100000u)
      << "structured content keeps what sandboxd sent (sandboxd caps it)";
}

TEST(FormatRunResultTest, NotesAndToolCallTotals) {
  RunReport report;
  report.session_reset = true;
  report.notes = {"the previous sandbox session was lost"};
  report.calls.total = 250;
  report.calls.failed = 3;
  for (int i = 0; i < 100; ++i) report.calls.listed.push_back({{"server", "s"}});
  json r = FormatRunResult(Ok("x"), report, 1024);
  EXPECT_THAT(TextOf(r), HasSubstr("[note] the previous sandbox session was lost\n"));
  EXPECT_THAT(TextOf(r), HasSubstr("[note] 250 tool calls (3 failed); tool_calls lists the first 100"));
  const json& s = r["structuredContent"];
  EXPECT_EQ(s["tool_calls_total"], 250);
  EXPECT_EQ(s["tool_calls_failed"], 3);
  EXPECT_EQ(s["tool_calls"].size(), 100u);
  EXPECT_EQ(s["session_reset"], true);
  EXPECT_THAT(s["note"].get<std::string>(), HasSubstr("lost; 250 tool calls"));
}

TEST(FormatRunResultTest, AllCallsListedNeedNoNote) {
  RunReport report;
  report.calls.total = 1;
  report.calls.listed.push_back({{"server", "s"}});
  EXPECT_THAT(TextOf(FormatRunResult(Ok("x"), report, 1024)), Not(HasSubstr("[note]")));
}

TEST(FormatRunErrorTest, IsAnErrorResultWithTheSameShape) {
  RunReport report;
  report.session = "default";
  json r = FormatRunError("sandboxd is unavailable", report);
  EXPECT_EQ(r["isError"], true);
  EXPECT_EQ(TextOf(r), "[error] sandboxd is unavailable");
  const json& s = r["structuredContent"];
  EXPECT_EQ(s["error"]["type"], "SandboxUnavailable");
  EXPECT_EQ(s["session"], "default");
  const json schema = RunResultSchema();
  for (const auto& field : schema["required"]) {
    EXPECT_TRUE(s.contains(field.get<std::string>())) << field;
  }
}

TEST(FormatRunResultTest, DisplaysBecomeContentBlocksInOrder) {
  Finished f = Ok("drawn\n");
  auto add = [&f](std::map<std::string, std::string> data) {
    sandbox::v1::Display* d = f.add_displays();
    for (auto& [k, v] : data) (*d->mutable_data())[k] = v;
  };
  add({{"image/png", "iVBORw0KGgo="}, {"text/plain", "<Figure>"}});
  add({{"text/html", "<table></table>"}, {"text/plain", "df"}});
  add({{"text/markdown", "# t"}, {"text/html", "<h1>t</h1>"}});
  add({{"image/svg+xml", "<svg/>"}});
  add({{"application/json", "{\"a\":1}"}});
  f.set_displays_dropped(2);
  json r = FormatRunResult(f, RunReport{}, 64 * 1024);
  ASSERT_EQ(r["content"].size(), 6u);
  EXPECT_EQ(r["content"][1], (json{{"type", "image"}, {"data", "iVBORw0KGgo="}, {"mimeType", "image/png"}}));
  EXPECT_EQ(r["content"][2], (json{{"type", "text"}, {"text", "<table></table>"}}));
  EXPECT_EQ(r["content"][3]["text"], "# t");  // markdown reads better than HTML
  EXPECT_EQ(r["content"][4], (json{{"type", "image"}, {"data", "PHN2Zy8+"}, {"mimeType", "image/svg+xml"}}));
  EXPECT_EQ(r["content"][5]["text"], "{\"a\":1}");
  const json& s = r["structuredContent"];
  ASSERT_EQ(s["displays"].size(), 5u);
  EXPECT_EQ(s["displays"][0], (json{{"mime_types", {"image/png", "text/plain"}}, {"shown_as", "image/png"}}));
  EXPECT_EQ(s["displays_dropped"], 2);
  EXPECT_THAT(TextOf(r), HasSubstr("2 display(s) dropped"));
  EXPECT_FALSE(r["isError"]);
}

}  // namespace
}  // namespace gateway
