// Images: the --images allowlist (ImageSet), the per-session choice by name, what GetInfo
// says each image offers (from a cache filled at start), the warm pool holding only the
// default image, and the choice surviving a daemon restart.
#include <chrono>
#include <future>
#include <thread>

#include "sandboxd/images.h"
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

constexpr char kData[] = "localhost/sandboxd-python-data:bookworm";

sandbox::v1::CreateSessionRequest AskingImage(const std::string& name) {
  sandbox::v1::CreateSessionRequest r;
  r.set_image(name);
  return r;
}

TEST(ImageSetTest, TheDefaultIsFirstAndOthersAreNamed) {
  absl::StatusOr<ImageSet> set = ImageSet::Parse("img:1", {std::string("data=") + kData, "x.2=r"});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->all().size(), 3u);
  EXPECT_EQ(set->default_image(), (ImageChoice{"default", "img:1"}));
  EXPECT_EQ(*set->Resolve(""), (ImageChoice{"default", "img:1"}));
  EXPECT_EQ(*set->Resolve("default"), (ImageChoice{"default", "img:1"}));
  EXPECT_EQ(*set->Resolve("data"), (ImageChoice{"data", kData}));
  absl::StatusOr<ImageChoice> other = set->Resolve("docker.io/library/alpine");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("default, data, x.2"));
}

TEST(ImageSetTest, BadEntriesAreRefused) {
  for (const char* bad : {"data", "=ref", "Data=ref", "default=ref", "-x=ref",
                                 "data=", "data=has space", "data=-flag", "d=r\nx"}) {
    EXPECT_FALSE(ImageSet::Parse("img", {bad}).ok()) << bad;
  }
  EXPECT_FALSE(ImageSet::Parse("img", {"a=r", "a=s"}).ok());
  EXPECT_FALSE(ImageSet::Parse("", {}).ok());
  EXPECT_FALSE(ImageSet::Parse("--privileged", {}).ok());
}

TEST(ImageSetTest, OffersAreACommaList) {
  EXPECT_EQ(ParseImageOffers(" python3, numpy ,,pandas "),
            (std::vector<std::string>{"python3", "numpy", "pandas"}));
  EXPECT_TRUE(ParseImageOffers("").empty());
}

TEST_F(SessionManagerTest, EachSessionRunsTheImageItNamed) {
  ManagerOptions o = Options();
  o.images = {std::string("data=") + kData};
  SessionManager* m = StartManager(o);
  sandbox::v1::Session plain = Create(m);
  sandbox::v1::Session data = Create(m, AskingImage("data"));
  ASSERT_FALSE(data.id().empty());
  EXPECT_EQ(plain.image(), "default");
  EXPECT_EQ(data.image(), "data");
  std::vector<std::string> started = runtime_->started_images();
  ASSERT_GE(started.size(), 2u);
  EXPECT_EQ(started[started.size() - 2], "host-python");
  EXPECT_EQ(started.back(), kData);
  EXPECT_EQ(Eval(m, data.id(), "6 * 7"), "42");

  const int starts = runtime_->start_calls();
  absl::StatusOr<sandbox::v1::Session> refused = m->CreateSession(AskingImage("alpine"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(runtime_->start_calls(), starts);
}

TEST_F(SessionManagerTest, InfoListsTheImagesWithWhatTheyOffer) {
  ManagerOptions o = Options();
  o.images = {std::string("data=") + kData, "gone=localhost/missing:1"};
  runtime_->SetImageAbsent("localhost/missing:1");
  SessionManager* m = StartManager(o);
  sandbox::v1::Info info = m->GetInfo();
  ASSERT_EQ(info.images_size(), 3);
  EXPECT_EQ(info.images(0).name(), "default");
  EXPECT_EQ(info.images(0).reference(), "host-python");
  EXPECT_TRUE(info.images(0).present());
  EXPECT_EQ(info.images(1).name(), "data");
  EXPECT_THAT(info.images(1).offers(), ::testing::ElementsAre("python3"));
  EXPECT_EQ(info.images(2).name(), "gone");
  EXPECT_FALSE(info.images(2).present());
  EXPECT_EQ(info.images(2).offers_size(), 0);
}

TEST_F(SessionManagerTest, ThePoolHoldsTheDefaultImageOnly) {
  ManagerOptions o = Options();
  o.pool_size = 1;
  o.images = {std::string("data=") + kData};
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  sandbox::v1::Session data = Create(m, AskingImage("data"));
  EXPECT_EQ(data.image(), "data");
  EXPECT_EQ(m->GetInfo().pool_ready(), 1u);
  EXPECT_EQ(runtime_->started_images().back(), kData);
}

TEST_F(SessionManagerTest, TheImageSurvivesARestart) {
  ManagerOptions o = Options();
  o.images = {std::string("data=") + kData};
  SessionManager* m1 = StartManager(o);
  sandbox::v1::Session data = Create(m1, AskingImage("data"));
  ASSERT_FALSE(data.id().empty());
  StopManager(m1);
  SessionManager* m2 = StartManager(o);
  absl::StatusOr<sandbox::v1::Session> got = m2->GetSession(data.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->image(), "data");
}

TEST_F(SessionManagerTest, ABadImageListFailsTheStart) {
  ManagerOptions o = Options();
  o.images = {"not a pair"};
  SessionManager m(o, runtime_.get(), &clock_, nullptr);
  EXPECT_EQ(m.Start().code(), absl::StatusCode::kInvalidArgument);
}

// A gateway asks every endpoint's GetInfo before each sandbox it places: GetInfo answers
// from the images' cache, filled at start, and while a stale one is inspected again on a
// worker.
TEST_F(SessionManagerTest, GetInfoAnswersFromTheCacheWhileImagesAreInspected) {
  SessionManager* m = StartManager(Options());
  // GetInfo's images while every inspect is held (none: it waited for one, a hang bound).
  auto images_while_held = [&]() -> std::optional<int> {
    runtime_->SetImageInspectHeld(true);
    std::future<sandbox::v1::Info> info = std::async(std::launch::async, [m] { return m->GetInfo(); });
    const bool answered = info.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    runtime_->SetImageInspectHeld(false);
    if (!answered) return std::nullopt;
    return info.get().images_size();
  };
  ASSERT_TRUE(WaitFor([&] { return runtime_->image_inspections() > 0; })) << "no inspect at start";
  EXPECT_EQ(images_while_held(), 1) << "the first GetInfo inspected the images";
  std::this_thread::sleep_for(std::chrono::milliseconds(5200));  // the cache is stale now
  EXPECT_EQ(images_while_held(), 1) << "GetInfo waited for a stale cache's inspect";
  StopManager(m);
}

// GetInfo lists the images from the first call: the start inspects them before the daemon
// serves.
TEST_F(SessionManagerTest, TheFirstGetInfoListsTheImages) {
  auto m = std::make_unique<SessionManager>(Options(), runtime_.get(), &clock_);
  ASSERT_OK(m->Start());
  EXPECT_EQ(runtime_->image_inspections(), 1) << "Start returned before it inspected the image";
  EXPECT_EQ(m->GetInfo().images_size(), 1);
  EXPECT_EQ(runtime_->image_inspections(), 1) << "GetInfo inspected it again";
  m->Shutdown();
}

// Before the first inspection of the images has answered (podman hangs at start: the probe
// fails and the images are inspected on a worker), a caller does not inspect them again,
// each in turn for up to --podman_timeout a command: GetInfo answers at once with no images
// known yet, and lists them once the inspection answers.
TEST_F(SessionManagerTest, WhileTheFirstImageInspectionHangsGetInfoDoesNotInspectAgain) {
  runtime_->SetProbeFailure("podman info timed out");
  runtime_->SetImageInspectHeld(true);
  SessionManager* m = StartManager(Options());
  if (!WaitFor([&] { return runtime_->inspections_held() == 1; })) {
    runtime_->SetImageInspectHeld(false);
    FAIL() << "no inspection at start";
  }
  std::future<sandbox::v1::Info> info = std::async(std::launch::async, [m] { return m->GetInfo(); });
  const bool answered = info.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  const int held = runtime_->inspections_held();
  runtime_->SetImageInspectHeld(false);
  ASSERT_TRUE(answered) << "GetInfo waited for podman";
  EXPECT_EQ(held, 1) << "GetInfo inspected the images again";
  EXPECT_EQ(info.get().images_size(), 0);
  EXPECT_TRUE(WaitFor([&] { return m->GetInfo().images_size() == 1; }));
}

}  // namespace
}  // namespace sandboxd::testing
