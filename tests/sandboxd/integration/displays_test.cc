// Integration: rich outputs against real Podman, in both isolation modes. In the default
// image display() streams HTML and images in order with stdout; in the data image
// (--images=data=..., built by scripts/setup.sh) a matplotlib chart arrives as a real PNG
// and a pandas DataFrame as HTML, and GetInfo says what each image offers (and that an
// image missing from podman's store is not present).
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;

constexpr char kDataImage[] = "localhost/sandboxd-python-data:bookworm";

class DisplaysTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new SandboxdProcess(
        {absl::StrCat("--images=data=", kDataImage, ",ghost=localhost/sandboxd-nonesuch:none")});
    ASSERT_TRUE(daemon_->Start());
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { stub_ = daemon_->Stub(); }

  std::string DataSession() {
    sandbox::v1::CreateSessionRequest req;
    req.set_image("data");
    sandbox::v1::Session s = CreateSession(*stub_, req);
    EXPECT_EQ(s.image(), "data");
    return s.id();
  }

  static SandboxdProcess* daemon_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
};
SandboxdProcess* DisplaysTest::daemon_ = nullptr;

TEST_F(DisplaysTest, DisplaysStreamInOrderWithStdout) {
  std::string session = CreateSession(*stub_).id();
  ExecuteOutcome out = Execute(*stub_, Start(session,
                                             "from mcp.display import HTML\n"
                                             "print('before')\n"
                                             "display(HTML('<b>bold</b>'))\n"
                                             "print('after')\n"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  std::vector<std::string> order;
  for (const auto& m : out.messages) {
    if (m.has_output()) order.push_back(m.output().text());
    if (m.has_display()) order.push_back(m.display().data().at("text/html"));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"before\n", "<b>bold</b>", "after\n"}));
  ASSERT_EQ(out.finished.displays_size(), 1);
  EXPECT_EQ(out.finished.displays(0).data().at("text/html"), "<b>bold</b>");
}

TEST_F(DisplaysTest, InfoSaysWhatEachImageOffers) {
  sandbox::v1::Info info = GetInfo(*stub_);
  ASSERT_EQ(info.images_size(), 3);
  EXPECT_EQ(info.images(0).name(), "default");
  EXPECT_TRUE(info.images(0).present());
  EXPECT_EQ(info.images(1).name(), "data");
  EXPECT_EQ(info.images(1).reference(), kDataImage);
  EXPECT_TRUE(info.images(1).present()) << "build it with scripts/setup.sh";
  std::vector<std::string> offers(info.images(1).offers().begin(), info.images(1).offers().end());
  EXPECT_EQ(offers, (std::vector<std::string>{"python3", "nodejs", "pip", "numpy", "pandas", "matplotlib", "pil"}));
  EXPECT_EQ(info.images(2).name(), "ghost");
  EXPECT_FALSE(info.images(2).present()) << "not in podman's store";
  EXPECT_TRUE(info.images(2).offers().empty());
  EXPECT_EQ(info.max_display_bytes(), 2u << 20);
}

TEST_F(DisplaysTest, MatplotlibChartsArePngDisplays) {
  std::string session = DataSession();
  // A figure left open is shown when the cell ends; plt.show() shows at once.
  Finished f = RunCode(*stub_, session,
                       "import matplotlib.pyplot as plt\n"
                       "plt.plot([1, 4, 9, 16])\n"
                       "plt.title('squares')\n"
                       "print('drawn')\n");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stderr(), "");
  ASSERT_EQ(f.displays_size(), 1) << f.DebugString();
  std::string png;
  ASSERT_TRUE(absl::Base64Unescape(f.displays(0).data().at("image/png"), &png));
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  f = RunCode(*stub_, session,
              "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nplt.show()\nprint(len(plt.get_fignums()))\n"
              "fig2, ax2 = plt.subplots()\nax2.plot([1])\nfig2\n");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stdout(), "0\n");  // show() closed the shown figure
  EXPECT_EQ(f.displays_size(), 2);  // the bar chart, and fig2 once (not again at the end)
  f = RunCode(*stub_, session, "len(plt.get_fignums())");
  EXPECT_EQ(f.result_repr(), "0");
}

TEST_F(DisplaysTest, DataFramesAreHtmlAndImagesArePng) {
  std::string session = DataSession();
  Finished f = RunCode(*stub_, session,
                       "import pandas as pd\n"
                       "pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})\n");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  ASSERT_EQ(f.displays_size(), 1);
  const auto& data = f.displays(0).data();
  EXPECT_NE(data.at("text/html").find("<td>Oslo</td>"), std::string::npos) << data.at("text/html");
  EXPECT_NE(data.at("text/plain").find("Lima"), std::string::npos);
  EXPECT_NE(f.result_repr().find("Oslo"), std::string::npos);

  f = RunCode(*stub_, session,
              "from PIL import Image\nImage.new('RGB', (8, 8), 'red')\n");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  ASSERT_EQ(f.displays_size(), 1);
  std::string png;
  ASSERT_TRUE(absl::Base64Unescape(f.displays(0).data().at("image/png"), &png));
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace sandboxd::testing
