// Rich outputs end to end through a real runner (ProcessRuntime): display messages in
// order with output, collected in Finished, the per-execution cap enforced by sandboxd
// even when sandboxed code lifts the runner's own budget, and hostile display chunks
// (a forged frame, a bundle that breaks the rules) parsed and refused.
#include "sandboxd/display_bundle.h"
#include "sandboxd/frame.h"
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

using nlohmann::json;

// A PNG signature and a few bytes, base64.
constexpr char kPngBase64[] = "iVBORw0KGgoAAAABAgM=";

// Code that reaches into the runner (it shares the process) and lifts its display budget,
// the way hostile code could.
constexpr char kLiftBudget[] =
    "import gc, sandbox_runner.output as o\n"
    "cap = [x for x in gc.get_objects() if isinstance(x, o.OutputCapture)][0]\n"
    "cap._display_budget = 10**9\n";

TEST_F(SessionManagerTest, DisplaysStreamInOrderAndAreCollected) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(),
                    "print('before', flush=True)\n"
                    "display({'text/html': '<b>t</b>', 'text/plain': 't'}, raw=True)\n"
                    "print('after')\n");
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->DebugString();
  std::vector<std::string> ev = st.collector->events();
  EXPECT_EQ(ev, (std::vector<std::string>{"started", "stdout", "display", "stdout", "finished"}));
  ASSERT_EQ(st.collector->displays().size(), 1u);
  EXPECT_EQ(st.collector->displays()[0].data().at("text/html"), "<b>t</b>");
  ASSERT_EQ(f->displays_size(), 1);
  EXPECT_EQ(f->displays(0).data().at("text/plain"), "t");
  EXPECT_EQ(f->displays_dropped(), 0u);
}

TEST_F(SessionManagerTest, DisplayCapIsEnforcedByTheRunner) {
  ManagerOptions o = Options();
  o.max_display_bytes = 1000;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(),
                    "display({'text/html': 'x' * 5000}, raw=True)\n"
                    "display({'text/html': 'small'}, raw=True)\n");
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->DebugString();
  ASSERT_EQ(f->displays_size(), 1);
  EXPECT_EQ(f->displays(0).data().at("text/html"), "small");
  EXPECT_EQ(f->displays_dropped(), 1u);
  EXPECT_THAT(f->stderr(), HasSubstr("[display dropped"));
}

TEST_F(SessionManagerTest, DisplayCapHoldsWhenCodeLiftsTheRunnersBudget) {
  ManagerOptions o = Options();
  o.max_display_bytes = 1000;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), std::string(kLiftBudget) +
                                   "for i in range(50):\n"
                                   "    display({'text/html': 'x' * 5000}, raw=True)\n");
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->displays_size(), 0);
  EXPECT_TRUE(st.collector->displays().empty());
  EXPECT_EQ(f->displays_dropped(), 50u);
  // One marker, not one per dropped display.
  EXPECT_EQ(f->stderr(), "[display dropped: the cap is 1000 bytes per execution]\n");
  EXPECT_EQ(Eval(m, s.id(), "1 + 1"), "2");
}

TEST_F(SessionManagerTest, ForgedDisplayLosesOnlyThatSession) {
  SessionManager* m = StartManager();
  sandbox::v1::Session victim = Create(m);
  sandbox::v1::Session other = Create(m);
  // A display chunk whose "PNG" is a GIF: the runner never sends that; forged frames do.
  Started st = Exec(m, victim.id(), std::string(kLiftBudget) +
                                        "cap._send([['display', {'image/png': "
                                        "'R0lGODlhAQABAAAAACw='}]])\n"
                                        "import time; time.sleep(5)\n");
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(m->GetSession(victim.id())->lost_reason(), HasSubstr("not a image/png image"));
  EXPECT_EQ(Eval(m, other.id(), "'fine'"), "'fine'");
}

// ---- the bundle parser -------------------------------------------------------------

TEST(DisplayBundleTest, AcceptsEveryAllowedType) {
  json bundle = {{"text/plain", "p"},      {"text/html", "<b>"},
                 {"text/markdown", "*m*"}, {"text/latex", "$x$"},
                 {"image/svg+xml", "<svg/>"}, {"image/png", kPngBase64},
                 {"image/jpeg", "/9j/4AAQ"}, {"application/json", "{\"a\": [1]}"}};
  absl::StatusOr<DisplayBundle> b = ParseDisplayBundle(bundle);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data.size(), 8u);
  uint64_t bytes = 0;
  for (const auto& [mime, data] : b->data) bytes += mime.size() + data.size();
  EXPECT_EQ(b->bytes, bytes);
}

TEST(DisplayBundleTest, OutputFrameCarriesDisplayChunks) {
  absl::StatusOr<RunnerMessage> m = ParseRunnerMessage(json::parse(
      R"({"type": "output", "id": 2,
          "chunks": [["stdout", "a"], ["display", {"text/plain": "d"}]]})"));
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& chunks = std::get<OutputMessage>(*m).chunks;
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].stream, OutputStream::kDisplay);
  EXPECT_EQ(chunks[1].display.data[0].second, "d");
}

TEST(DisplayBundleTest, RefusesWhatTheRunnerNeverSends) {
  std::string deep(100000, '[');
  const std::vector<std::pair<json, std::string>> cases = {
      {json("text"), "not a non-empty"},
      {json::object(), "not a non-empty"},
      {json{{"application/x-widget", "w"}}, "is not allowed"},
      {json{{"text/html", 5}}, "is not a string"},
      {json{{"image/png", "not base64!"}}, "not base64"},
      {json{{"image/png", "iVBO=w0K"}}, "not base64"},
      {json{{"image/png", "iVBORw0KGgo"}}, "not base64"},  // length not a multiple of 4
      {json{{"image/png", ""}}, "not base64"},
      {json{{"image/png", "R0lGODlhAQABAAAAACw="}}, "not a image/png image"},
      {json{{"image/jpeg", kPngBase64}}, "not a image/jpeg image"},
      {json{{"application/json", "{nope"}}, "display json"},
      {json{{"application/json", deep}}, "display json"},
  };
  for (const auto& [bundle, why] : cases) {
    absl::StatusOr<DisplayBundle> b = ParseDisplayBundle(bundle);
    ASSERT_FALSE(b.ok()) << bundle.dump().substr(0, 80);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr(why)) << bundle.dump().substr(0, 80);
  }
  absl::StatusOr<RunnerMessage> m = ParseRunnerMessage(
      json::parse(R"({"type": "output", "id": 1, "chunks": [["display", "x"]]})"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("display is not"));
}

TEST(DisplayBundleTest, DoneCarriesTheRunnersDropCount) {
  absl::StatusOr<RunnerMessage> m = ParseRunnerMessage(
      json::parse(R"({"type": "done", "id": 1, "status": "ok", "displays_dropped": 3})"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<DoneMessage>(*m).displays_dropped, 3u);
  absl::StatusOr<RunnerMessage> bad = ParseRunnerMessage(
      json::parse(R"({"type": "done", "id": 1, "status": "ok", "displays_dropped": -1})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("displays_dropped"));
}

}  // namespace
}  // namespace sandboxd::testing
