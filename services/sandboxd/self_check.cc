#include "self_check.h"

#include "absl/strings/str_cat.h"
#include "base/notification.h"

namespace sandboxd {
namespace {

class Collector : public ExecutionObserver {
 public:
  void OnStarted(uint64_t) override {}
  void OnOutput(OutputStream stream, const std::string& text) override {
    codemode::MutexLock lock(&mu_);
    (stream == OutputStream::kStdout ? stdout_ : stderr_) += text;
  }
  void OnToolCall(const sandbox::v1::ToolCall&) override {}
  void OnFinished(const sandbox::v1::Finished& f) override {
    {
      codemode::MutexLock lock(&mu_);
      finished_ = f;
    }
    done_.Notify();
  }

  codemode::Notification done_;
  codemode::Mutex mu_;
  std::string stdout_ ABSL_GUARDED_BY(mu_);
  std::string stderr_ ABSL_GUARDED_BY(mu_);
  sandbox::v1::Finished finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status SelfCheck(SessionManager& manager) {
  sandbox::v1::CreateSessionRequest create;
  create.set_label("self-check");
  absl::StatusOr<sandbox::v1::Session> session = manager.CreateSession(create);
  if (!session.ok()) {
    return absl::Status(session.status().code(),
                        absl::StrCat("cannot create a session: ", session.status().message()));
  }
  auto collector = std::make_shared<Collector>();
  ExecutionRequest request;
  request.code = "print(1)";
  request.timeout_ms = 30000;
  request.tool_router = false;
  absl::StatusOr<std::shared_ptr<Execution>> exec =
      manager.Execute(session->id(), std::move(request), collector);
  absl::Status result = exec.status();
  if (result.ok()) {
    collector->done_.WaitForNotification();
    codemode::MutexLock lock(&collector->mu_);
    if (collector->finished_.status() != sandbox::v1::Finished::OK ||
        collector->stdout_ != "1\n") {
      result = absl::InternalError(absl::StrCat(
          "print(1) in a new session gave status ",
          sandbox::v1::Finished::Status_Name(collector->finished_.status()), ", stdout '",
          collector->stdout_, "', stderr '", collector->stderr_, "' ",
          collector->finished_.error().message()));
    }
  }
  absl::Status deleted = manager.DeleteSession(session->id());
  return result.ok() ? deleted : result;
}

}  // namespace sandboxd
