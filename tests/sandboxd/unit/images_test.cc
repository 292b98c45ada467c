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
  // No image podman could pull, and no string GetInfo's protobuf or podman's JSON could
  // carry: refused, and said escaped.
  EXPECT_FALSE(ImageSet::Parse("caf\xc3\xa9", {}).ok());
  for (const char* bad : {"img\xff", "a\xe2\x80\xae" "b", "a\x7f"}) {
    absl::StatusOr<ImageSet> set = ImageSet::Parse(bad, {});
    EXPECT_FALSE(set.ok()) << bad;
    EXPECT_THAT(std::string(set.status().message()), ::testing::Not(HasSubstr(bad)));
    set = ImageSet::Parse("img", {std::string("data=") + bad});
    EXPECT_FALSE(set.ok()) << bad;
    EXPECT_THAT(std::string(set.status().message()), ::testing::Not(HasSubstr(bad)));
  }
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
  clock_.Advance(absl::Seconds(6));  // the cache is stale now
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

// A podman that answers its probe but hangs on image commands holds the start for
// --start_images_wait at most, not for --podman_timeout per command and image (which would
// outlast systemd's start timeout and restart the daemon in a loop): the daemon serves, and
// GetInfo lists the images once podman answers.
TEST_F(SessionManagerTest, AHangingImageInspectionHoldsTheStartForABoundedTime) {
  runtime_->SetImageInspectHeld(true);
  ManagerOptions o = Options();
  o.start_images_wait = absl::Milliseconds(300);
  auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_);
  std::future<absl::Status> started = std::async(std::launch::async, [&] { return m->Start(); });
  const bool returned = started.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  const int images = returned ? m->GetInfo().images_size() : -1;
  runtime_->SetImageInspectHeld(false);
  ASSERT_TRUE(returned) << "the start waited for podman's image inspection";
  ASSERT_OK(started.get());
  EXPECT_EQ(images, 0) << "GetInfo listed images nobody had inspected";
  EXPECT_TRUE(WaitFor([&] { return m->GetInfo().images_size() == 1; }));
  m->Shutdown();
}

// An inspection that fails (podman timed out) says nothing of the image: GetInfo keeps what
// it knew, and never calls a present image absent. Only podman saying so makes it absent.
TEST_F(SessionManagerTest, AFailedInspectionKeepsWhatWasKnownOfTheImages) {
  runtime_->SetImageOffers({"python3", "nodejs"});
  SessionManager* m = StartManager(Options());
  ASSERT_EQ(m->GetInfo().images_size(), 1);
  runtime_->SetImageInspectFailure("podman image timed out");
  const int before = runtime_->image_inspections();
  clock_.Advance(absl::Seconds(6));  // stale: the next GetInfo refreshes on a worker
  (void)m->GetInfo();
  ASSERT_TRUE(WaitFor([&] { return runtime_->image_inspections() > before; }));
  for (int i = 0; i < 20; ++i) {  // the refresh answers soon after its inspection
    sandbox::v1::Info info = m->GetInfo();
    ASSERT_EQ(info.images_size(), 1);
    EXPECT_TRUE(info.images(0).present()) << "a failed inspection called the image absent";
    EXPECT_THAT(info.images(0).offers(), ::testing::ElementsAre("python3", "nodejs"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runtime_->SetImageInspectFailure(std::nullopt);
  runtime_->SetImageAbsent("host-python");
  clock_.Advance(absl::Seconds(6));
  EXPECT_TRUE(WaitFor([&] {
    sandbox::v1::Info info = m->GetInfo();
    return info.images_size() == 1 && !info.images(0).present();
  })) << "an absent image was not called absent";
}

}  // namespace
}  // namespace sandboxd::testing
