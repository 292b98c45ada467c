// SessionManager with both runtimes (ProcessRuntime runs Node.js on the JavaScript bundle
// as it runs the Python zipapp): each CreateSession takes from the warm pool of its own
// runtime, a JavaScript pool that cannot run says why once and holds nothing, and an
// execution whose runtime is not its session's is refused before it runs
// (StartExecution.runtime).
#include <unistd.h>

#include <cstdlib>

#include "session_manager_fixture.h"

#ifndef SANDBOXD_JS_RUNNER_PATH
#error "SANDBOXD_JS_RUNNER_PATH must be defined (absolute path of sandbox_runner.js)"
#endif

namespace sandboxd::testing {
namespace {

class SessionRuntimesTest : public SessionManagerTest {
 protected:
  // A daemon that can run JavaScript: its runner, and an image that offers nodejs.
  ManagerOptions BothRuntimes(uint32_t pool_size, uint32_t js_pool_size) {
    ManagerOptions o = Options();
    o.js_runner_path = SANDBOXD_JS_RUNNER_PATH;
    o.pool_size = pool_size;
    o.js_pool_size = js_pool_size;
    runtime_->SetImageOffers({"python3", "nodejs"});
    return o;
  }
  static sandbox::v1::PoolInfo Pool(SessionManager* m, Language language) {
    const sandbox::v1::Info info = m->GetInfo();
    for (const sandbox::v1::PoolInfo& p : info.pools()) {
      if (p.runtime() == LanguageName(language)) return p;
    }
    ADD_FAILURE() << "GetInfo has no pool " << LanguageName(language);
    return {};
  }
  std::vector<std::string> Containers(Language language) {
    std::vector<std::string> names;
    auto listed = runtime_->List(kLanguageLabel, std::string(LanguageName(language)));
    if (listed.ok()) {
      for (const ContainerSummary& c : *listed) names.push_back(c.name);
    }
    return names;
  }
  static sandbox::v1::CreateSessionRequest JavaScript() {
    sandbox::v1::CreateSessionRequest r;
    r.set_runtime("javascript");
    return r;
  }
};

TEST_F(SessionRuntimesTest, EachSessionComesFromThePoolOfItsRuntime) {
  SessionManager* m = StartManager(BothRuntimes(1, 1));
  ASSERT_TRUE(WaitFor([&] {
    return Pool(m, Language::kPython).ready() == 1 && Pool(m, Language::kJavaScript).ready() == 1;
  }));
  EXPECT_EQ(Pool(m, Language::kJavaScript).target(), 1u);
  const std::vector<std::string> js_pooled = Containers(Language::kJavaScript);
  ASSERT_EQ(js_pooled.size(), 1u);

  sandbox::v1::Session js = Create(m, JavaScript());
  EXPECT_EQ(js.container_id(), js_pooled[0]) << "the JavaScript pool's container";
  EXPECT_EQ(js.runtime(), "javascript");
  EXPECT_EQ(Eval(m, js.id(), "1+1"), "2");
  EXPECT_EQ(Pool(m, Language::kJavaScript).taken_total(), 1u);
  EXPECT_EQ(Pool(m, Language::kPython).taken_total(), 0u);
  EXPECT_EQ(Pool(m, Language::kPython).ready(), 1u) << "the Python pool gave nothing";
  ASSERT_TRUE(WaitFor([&] { return Pool(m, Language::kJavaScript).ready() == 1; }))
      << "the JavaScript pool refills";

  sandbox::v1::Session py = Create(m);
  EXPECT_EQ(Pool(m, Language::kPython).taken_total(), 1u);
  EXPECT_EQ(Pool(m, Language::kJavaScript).taken_total(), 1u) << "nor the JavaScript pool";
  const std::vector<std::string> py_containers = Containers(Language::kPython);
  EXPECT_NE(std::find(py_containers.begin(), py_containers.end(), py.container_id()),
            py_containers.end());
  EXPECT_EQ(Eval(m, py.id(), "import sys; sys.version_info[0]"), "3");
}

TEST_F(SessionRuntimesTest, WithoutAPoolOfItsRuntimeASessionStartsCold) {
  SessionManager* m = StartManager(BothRuntimes(/*pool_size=*/1, /*js_pool_size=*/0));
  ASSERT_TRUE(WaitFor([&] { return Pool(m, Language::kPython).ready() == 1; }));
  EXPECT_EQ(Pool(m, Language::kJavaScript).target(), 0u);
  sandbox::v1::Session js = Create(m, JavaScript());
  EXPECT_EQ(Eval(m, js.id(), "[1, 2].map(x => x * 2).length"), "2");
  EXPECT_EQ(Pool(m, Language::kPython).taken_total(), 0u) << "a Python container never";
  EXPECT_EQ(Pool(m, Language::kJavaScript).taken_total(), 0u);
  StopManager(m);

  m = StartManager(BothRuntimes(/*pool_size=*/0, /*js_pool_size=*/1));
  ASSERT_TRUE(WaitFor([&] { return Pool(m, Language::kJavaScript).ready() == 1; }));
  sandbox::v1::Session py = Create(m);
  EXPECT_EQ(Eval(m, py.id(), "import sys; sys.version_info[0]"), "3");
  EXPECT_EQ(Pool(m, Language::kJavaScript).taken_total(), 0u) << "a JavaScript container never";
  EXPECT_EQ(Pool(m, Language::kJavaScript).ready(), 1u);
}

// An image that does not offer nodejs, or no JavaScript runner: the JavaScript pool holds
// nothing, wants nothing, and the log says why once.
TEST_F(SessionRuntimesTest, AJavaScriptPoolThatCannotRunSaysWhyOnce) {
  LogCapture log;  // before the manager's threads, removed after they are gone
  ManagerOptions o = BothRuntimes(1, 1);
  o.js_pool_recheck = absl::Milliseconds(50);  // asked again many times, said once
  runtime_->SetImageOffers({"python3"});
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return !Pool(m, Language::kJavaScript).unavailable().empty(); }));
  EXPECT_THAT(Pool(m, Language::kJavaScript).unavailable(), HasSubstr("does not offer nodejs"));
  EXPECT_EQ(Pool(m, Language::kJavaScript).target(), 0u);
  ASSERT_TRUE(WaitFor([&] { return Pool(m, Language::kPython).ready() == 1; }));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(Containers(Language::kJavaScript).empty());
  StopManager(m);

  o.js_runner_path.clear();
  m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return !Pool(m, Language::kJavaScript).unavailable().empty(); }));
  EXPECT_THAT(Pool(m, Language::kJavaScript).unavailable(), HasSubstr("--js_runner"));
  // GetInfo says why before the pool's thread has asked (a thread that may start late on a
  // busy machine): the pool's own line is waited for, then given time to repeat itself.
  const char* said = "warm pool (javascript): holds no containers";
  EXPECT_TRUE(WaitFor([&] { return log.Count(said) >= 2; }));
  absl::SleepFor(absl::Milliseconds(500));
  StopManager(m);
  EXPECT_EQ(log.Count(said), 2) << "once per manager";
  EXPECT_EQ(log.Count("does not offer nodejs"), 1);
}

// GetInfo says why JavaScript cannot run here whether or not a JavaScript pool is asked for
// (--js_pool_size=0 too): the gateway hides run_javascript by it.
TEST_F(SessionRuntimesTest, WithoutAJavaScriptPoolGetInfoStillSaysWhyJavaScriptCannotRun) {
  ManagerOptions o = BothRuntimes(/*pool_size=*/0, /*js_pool_size=*/0);
  o.js_runner_path.clear();
  SessionManager* m = StartManager(o);
  EXPECT_THAT(Pool(m, Language::kJavaScript).unavailable(), HasSubstr("--js_runner"));
  EXPECT_EQ(Pool(m, Language::kPython).unavailable(), "");
  StopManager(m);

  o = BothRuntimes(0, 0);
  runtime_->SetImageOffers({"python3"});
  m = StartManager(o);
  EXPECT_THAT(Pool(m, Language::kJavaScript).unavailable(), HasSubstr("does not offer nodejs"));
  StopManager(m);

  m = StartManager(BothRuntimes(0, 0));
  EXPECT_EQ(Pool(m, Language::kJavaScript).unavailable(), "") << "it can";
}

// An image rebuilt with nodejs while the daemon runs: the JavaScript pool's recheck looks
// at the image again (the image cache refreshes when it is older than 5 s) and the pool
// fills, without anyone calling GetInfo; the cache is not kept as it was forever.
TEST_F(SessionRuntimesTest, AJavaScriptPoolStartsOnceTheImageOffersNodejs) {
  ManagerOptions o = BothRuntimes(0, 1);
  o.js_pool_recheck = absl::Milliseconds(200);
  runtime_->SetImageOffers({"python3"});
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return !Pool(m, Language::kJavaScript).unavailable().empty(); }));
  runtime_->SetImageOffers({"python3", "nodejs"});
  clock_.Advance(absl::Seconds(6));  // the cache is stale (it ages by the manager's clock)
  EXPECT_TRUE(WaitFor([&] { return Containers(Language::kJavaScript).size() == 1; }, absl::Seconds(15)))
      << Pool(m, Language::kJavaScript).unavailable();
  StopManager(m);
}

// A JavaScript runner that cannot start (here: it exits at once) breaks JavaScript only:
// health stays SERVING while Python sessions start, through the JavaScript pool's retries.
// A failed JavaScript start does not make the daemon NOT_SERVING until the next success.
TEST_F(SessionRuntimesTest, ABrokenJavaScriptRunnerDoesNotMakeTheDaemonNotServing) {
  char path[] = "/tmp/broken-runner-XXXXXX.js";
  const int fd = mkstemps(path, 3);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "process.exit(3);\n", 17), 17);
  close(fd);
  LogCapture log;  // before the manager's threads, removed after they are gone
  ManagerOptions o = BothRuntimes(1, 1);
  o.js_runner_path = path;
  o.runner_start_timeout = absl::Seconds(1);
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return Pool(m, Language::kPython).ready() == 1; }));
  ASSERT_TRUE(m->readiness().serving) << m->readiness().reason;
  // The JavaScript pool says why (once), and retries after 1 s, 2 s, ...: watch two more.
  ASSERT_TRUE(WaitFor([&] { return log.Count("warm pool (javascript): cannot start a container") == 1; }));
  const absl::Time until = absl::Now() + absl::Seconds(4);
  while (absl::Now() < until) {
    ASSERT_TRUE(m->readiness().serving) << m->readiness().reason;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(Pool(m, Language::kJavaScript).ready(), 0u);
  EXPECT_FALSE(m->CreateSession(JavaScript()).ok()) << "a JavaScript session cannot start";
  EXPECT_TRUE(m->readiness().serving) << m->readiness().reason;
  StopManager(m);
  EXPECT_EQ(log.Count("warm pool (javascript): cannot start a container"), 1) << "said once";
  unlink(path);
}

// StartExecution.runtime: the gateway says which language it sends; sandboxd refuses code
// of another language than the session's before anything runs. Empty is not checked.
TEST_F(SessionRuntimesTest, AnExecutionOfAnotherRuntimeIsRefusedBeforeItRuns) {
  SessionManager* m = StartManager(BothRuntimes(0, 0));
  sandbox::v1::Session py = Create(m);
  sandbox::v1::Session js = Create(m, JavaScript());
  auto run = [&](const std::string& id, const std::string& code, const std::string& runtime) {
    ExecutionRequest r;
    r.code = code;
    r.runtime = runtime;
    return m->Execute(id, std::move(r), std::make_shared<Collector>());
  };
  absl::StatusOr<std::shared_ptr<Execution>> refused = run(py.id(), "globalThis.x = 1", "javascript");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("this code is javascript"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(py.id() + " runs python"));
  refused = run(js.id(), "x = 1", "python");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(js.id() + " runs javascript"));
  refused = run(js.id(), "1", "ruby");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(py.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->executions(), 0u) << "nothing ran";
  // The session's own runtime, or none at all, runs.
  for (const char* runtime : {"python", ""}) {
    absl::StatusOr<std::shared_ptr<Execution>> ok = run(py.id(), "1", runtime);
    EXPECT_TRUE(ok.ok()) << ok.status();
  }
  EXPECT_TRUE(run(js.id(), "1", "javascript").ok());
  EXPECT_EQ(Eval(m, js.id(), "typeof globalThis.x"), "'undefined'");
}

}  // namespace
}  // namespace sandboxd::testing
