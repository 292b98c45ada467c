// Stateless runs (protocol 2026-07-28) that wait for their client's answers between requests. See
// pending_runs.h.
#include "adapter/pending_runs.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/cancel.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

namespace {

constexpr char kRunGone[] =
    "the run this requestState belongs to is not held by this gateway: its result was already "
    "collected or dropped after nobody came for it, or it runs on another gateway replica (send "
    "the call again without requestState to run the code anew)";

std::string RandomId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return "";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

// What binds a state to its call: the tool's name and arguments, hashed.
std::string CallDigest(const std::string& name, const json& arguments) {
  const std::string text = absl::StrCat(name, "\n", arguments.dump(-1, ' ', false, json::error_handler_t::replace));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

// The key of question `seq` in inputRequests and inputResponses.
std::string QuestionKey(uint64_t seq) { return absl::StrCat("approval-", seq); }

}  // namespace

struct PendingRuns::Run {
  std::string id;
  std::string credential;
  std::string digest;  // CallDigest of the call that started it
  ToolCallContext own;  // the run's context; its fields are set before the thread starts

  codemode::Mutex mu;
  bool cancelled ABSL_GUARDED_BY(mu) = false;  // own.cancel fired
  // The question the run waits on (RunApprovals asks one at a time).
  uint64_t seq ABSL_GUARDED_BY(mu) = 0;
  bool asking ABSL_GUARDED_BY(mu) = false;
  bool sent ABSL_GUARDED_BY(mu) = false;  // in an input_required result, not yet answered
  uint64_t withdrawn ABSL_GUARDED_BY(mu) = 0;  // a question whose asker ended
  std::string method ABSL_GUARDED_BY(mu);
  json params ABSL_GUARDED_BY(mu);
  std::optional<json> answer ABSL_GUARDED_BY(mu);
  // The request waiting for the run: at most one. `attachment` counts attachments, so a
  // cancellation of a request that has since let go of the run cancels nothing.
  bool attached ABSL_GUARDED_BY(mu) = false;
  uint64_t attachment ABSL_GUARDED_BY(mu) = 0;
  bool request_cancelled ABSL_GUARDED_BY(mu) = false;
  ToolCallContext* waiter ABSL_GUARDED_BY(mu) = nullptr;
  std::optional<absl::StatusOr<json>> result ABSL_GUARDED_BY(mu);
  bool collected ABSL_GUARDED_BY(mu) = false;  // a request took the result
  // The result's charge while it is kept for a retry (KeepResult); reset once collected.
  std::optional<codemode::ByteHold> kept ABSL_GUARDED_BY(mu);
  bool closing ABSL_GUARDED_BY(mu) = false;  // the gateway is closing: nothing is kept
  absl::Time finished_at ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();

  // own.ask_client: the question goes out with the next input_required result, and the
  // run's tool call waits here for the answer a retry brings, until the run or `also` (what
  // asks: the execution) is cancelled or `timeout` passes: a question never outlives the
  // execution that asked it.
  absl::StatusOr<json> Ask(const std::string& m, json p, absl::Duration timeout,
                           const std::shared_ptr<codemode::CancelToken>& also, const std::shared_ptr<Run>& self) {
    uint64_t mine;
    {
      codemode::MutexLock lock(&mu);
      if (asking) return absl::FailedPreconditionError("a question of this run is already waiting");
      mine = seq + 1;  // only this run's one asker posts questions
    }
    if (also) {  // before the question is out, so that no retry finds it after its asker ended
      std::weak_ptr<Run> weak = self;
      also->OnCancel([weak, mine] {
        if (auto r = weak.lock()) {
          codemode::MutexLock lock(&r->mu);
          r->withdrawn = mine;
          if (r->seq == mine) r->asking = false;  // a retry from now on finds no question out
        }
      });
    }
    {
      codemode::MutexLock lock(&mu);
      seq = mine;
      asking = withdrawn != mine;
      sent = false;
      method = m;
      params = std::move(p);
      answer.reset();
    }
    codemode::MutexLock lock(&mu);
    auto done = [this, mine]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return answer.has_value() || cancelled || withdrawn == mine;
    };
    mu.AwaitWithTimeout(absl::Condition(&done), timeout);
    asking = false;
    sent = false;
    params = json();
    if (answer) return *std::exchange(answer, std::nullopt);
    if (cancelled || withdrawn == mine) return absl::CancelledError("the run ended");
    return absl::DeadlineExceededError("nobody answered");
  }

  // The input_required result for the question this run asks; it is out from now on.
  json InputRequired(const HandleSealer& sealer, absl::Duration keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sent = true;
    const std::string state = sealer.SealState(absl::StrCat(id, " ", seq, " ", digest), credential, keep);
    spdlog::info("run_python: a run of {} waits for its client's answer (question {})", credential, seq);
    return {{"resultType", "input_required"},
            {"inputRequests", {{QuestionKey(seq), {{"method", method}, {"params", params}}}}},
            {"requestState", state}};
  }

  // own.progress: to the request waiting, if any.
  void Progress(double value, std::optional<double> total, const std::string& message) {
    // Sent under the lock: Wait() lets go of the request under it, so its context is alive.
    codemode::MutexLock lock(&mu);
    if (attached && waiter && waiter->progress) waiter->progress(value, total, message);
  }
};

namespace {

codemode::ThreadPoolOptions WorkerOptions(const PendingRunsOptions& options) {
  codemode::ThreadPoolOptions o;
  o.name = "run_python run";
  // A run holds its worker while it is held here; one that just let go of its run waits
  // for the worker to come back.
  o.max_threads = std::max<size_t>(options.max_runs, 1);
  o.max_idle = 8;
  o.idle_timeout = absl::Seconds(60);
  return o;
}

}  // namespace

PendingRuns::PendingRuns(const HandleSealer* sealer, PendingRunsOptions options)
    : sealer_(sealer),
      options_(options),
      kept_("max_kept_result_bytes_per_credential", options.max_kept_bytes_per_credential),
      workers_(WorkerOptions(options)) {}

PendingRuns::~PendingRuns() {
  std::map<std::string, std::shared_ptr<Run>> runs;
  {
    codemode::MutexLock lock(&mu_);
    closing_ = true;
    runs = runs_;
  }
  for (auto& [id, run] : runs) {
    {
      codemode::MutexLock lock(&run->mu);
      run->closing = true;  // its worker stops holding a finished run's result
    }
    run->own.cancel->Cancel("the gateway is shutting down");
  }
  workers_.Stop();
}

size_t PendingRuns::size() {
  codemode::MutexLock lock(&mu_);
  return runs_.size();
}

size_t PendingRuns::kept_bytes(const std::string& credential) const { return kept_.Used(credential); }

uint64_t PendingRuns::results_not_kept() const { return not_kept_.load(); }

void PendingRuns::KeepResult(Run& run) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // under run.mu
  if (run.kept || run.closing || !run.result) return;
  // What the result costs while held: its JSON text, about the size of its parsed form.
  const size_t bytes = run.result->ok()
                           ? run.result->value().dump(-1, ' ', false, json::error_handler_t::replace).size()
                           : run.result->status().message().size();
  codemode::ByteBudget::Parents parents;
  if (run.own.budget) parents.push_back(run.own.budget);  // the credential's share, the ceiling
  run.kept.emplace(kept_.Of(run.credential, parents));
  const codemode::ByteBudget* full = run.kept->GrowBy(bytes);
  if (full == nullptr) return;
  not_kept_.fetch_add(1);
  spdlog::warn("run_python: a run of {} finished with no request waiting for it, and its result "
               "({} bytes) is dropped: keeping it would pass {}",
               run.credential, bytes, full->Describe());
  run.result = absl::ResourceExhaustedError(absl::StrCat(
      "the run finished, but its result (", bytes, " bytes) was not kept for this retry: no request "
      "waited for it, and keeping it would pass ", full->Describe(),
      " (results of this credential's runs that nobody collected hold the rest). Its tool calls "
      "were made: send the code again only if that is safe"));
}

void PendingRuns::HoldUntilCollected(const std::shared_ptr<Run>& run) {
  {
    codemode::MutexLock lock(&run->mu);
    auto done = [&run]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run->mu) { return run->collected || run->closing; };
    run->mu.AwaitWithTimeout(absl::Condition(&done), options_.keep);
  }
  codemode::MutexLock registry(&mu_);
  auto it = runs_.find(run->id);
  if (it == runs_.end() || it->second != run) return;  // collected
  codemode::MutexLock lock(&run->mu);
  if (run->attached) return;  // a retry came at the last moment and takes the result
  run->kept.reset();
  runs_.erase(it);
}

void PendingRuns::Sweep() {
  const absl::Time now = absl::Now();
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& run = *it->second;
    bool expired;
    {
      codemode::MutexLock lock(&run.mu);
      expired = !run.attached && run.result && run.finished_at + options_.keep < now;
      if (expired) run.kept.reset();
    }
    it = expired ? runs_.erase(it) : std::next(it);
  }
}

absl::StatusOr<json> PendingRuns::Start(Work work, const std::string& name, const json& arguments,
                                        ToolCallContext& ctx) {
  auto run = std::make_shared<Run>();
  run->id = RandomId();
  if (run->id.empty()) return absl::InternalError("cannot read random bytes for the run's id");
  run->credential = ctx.credential;
  run->digest = CallDigest(name, arguments);
  ToolCallContext& own = run->own;
  own.cancel = std::make_shared<codemode::CancelToken>();
  own.mcp_session = ctx.mcp_session;
  own.credential = ctx.credential;
  own.protocol_version = ctx.protocol_version;
  own.client_capabilities = ctx.client_capabilities;
  own.budget = ctx.budget;
  // The run outlives this request: nothing of the request's own may be called from it.
  std::weak_ptr<Run> weak = run;
  own.cancel->OnCancel([weak] {
    if (auto r = weak.lock()) {
      codemode::MutexLock lock(&r->mu);
      r->cancelled = true;
    }
  });
  Run* raw = run.get();  // the thread and these callbacks hold `run`
  own.ask_client = [raw, weak](const std::string& method, json params, absl::Duration timeout,
                               const std::shared_ptr<codemode::CancelToken>& also) -> absl::StatusOr<json> {
    std::shared_ptr<Run> self = weak.lock();
    if (!self) return absl::CancelledError("the run ended");
    return raw->Ask(method, std::move(params), timeout, also, self);
  };
  own.progress = [raw](double value, std::optional<double> total, const std::string& message) {
    raw->Progress(value, total, message);
  };
  {
    codemode::MutexLock lock(&mu_);
    if (closing_) return absl::UnavailableError("the gateway is shutting down");
    Sweep();
    size_t mine = 0;
    for (const auto& [id, r] : runs_) mine += r->credential == ctx.credential;
    // Each message says only what is the caller's: never how many runs other credentials
    // hold.
    if (mine >= options_.max_runs_per_credential) {
      return absl::ResourceExhaustedError(absl::StrCat(
          mine, " runs of this credential are running or waiting for answers on this gateway (at most ",
          options_.max_runs_per_credential, "); finish or answer those first"));
    }
    if (runs_.size() >= options_.max_runs) {
      return absl::ResourceExhaustedError(
          "this gateway holds as many runs waiting for answers as it may; try again later");
    }
    runs_[run->id] = run;
  }
  // The worker holds a finished run until its result is collected or `keep` passes, so the
  // result's charge ends on time (the destructor, waiting for every worker, sets `closing`).
  absl::Status launched = workers_.Schedule([this, run, work = std::move(work)]() mutable {
    absl::StatusOr<json> result = work(run->own);
    work = nullptr;
    {
      codemode::MutexLock lock(&run->mu);
      run->result = std::move(result);
      run->finished_at = absl::Now();
      // A request waiting now takes the result at once; otherwise it is kept, and charged.
      if (!run->attached || run->request_cancelled) KeepResult(*run);
    }
    HoldUntilCollected(run);
  });
  if (!launched.ok()) {
    codemode::MutexLock lock(&mu_);
    runs_.erase(run->id);
    return absl::ResourceExhaustedError(absl::StrCat("cannot start the run: ", launched.message()));
  }
  return Wait(run, ctx, nullptr);
}

absl::StatusOr<json> PendingRuns::Resume(const std::string& name, const json& arguments, ToolCallContext& ctx) {
  const absl::Status invalid = absl::InvalidArgumentError(kInvalidState);
  absl::StatusOr<std::string> state = sealer_->OpenState(ctx.request_state, ctx.credential);
  if (!state.ok()) return invalid;
  // "<run id> <question> <call digest>"
  std::vector<std::string> parts = absl::StrSplit(*state, ' ');
  uint64_t seq = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &seq)) return invalid;
  if (parts[2] != CallDigest(name, arguments)) return invalid;
  std::shared_ptr<Run> run;
  {
    codemode::MutexLock lock(&mu_);
    Sweep();
    if (auto it = runs_.find(parts[0]); it != runs_.end()) run = it->second;
  }
  if (!run) return absl::FailedPreconditionError(kRunGone);
  if (run->credential != ctx.credential) return invalid;  // sealed for it; checked again
  {
    // A retry that brings answers to a question it could not have been asked: -32021, and
    // the run goes on waiting for a retry that can answer.
    codemode::MutexLock lock(&run->mu);
    if (run->asking && run->method == "elicitation/create" && !ctx.client_capabilities.contains("elicitation")) {
      return MissingClientCapability(
          "this run waits for the answer to an elicitation/create, and this request declares no elicitation "
          "capability (_meta io.modelcontextprotocol/clientCapabilities)",
          {{"elicitation", {{"form", json::object()}}}});
    }
  }
  const json& responses = ctx.input_responses;
  return Wait(run, ctx, [seq, &responses](Run& r) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // under r.mu
    if (!r.asking || !r.sent) return;  // nothing out: wait for what comes next
    auto answer = responses.find(QuestionKey(seq));
    if (r.seq == seq && answer != responses.end() && answer->is_object()) {
      r.answer = *answer;
    } else {
      // Not answered, or the state of an older question (the retry of a lost newer one):
      // the question waiting now goes out again.
      r.sent = false;
    }
  });
}

absl::StatusOr<json> PendingRuns::Wait(const std::shared_ptr<Run>& run, ToolCallContext& ctx,
                                       const std::function<void(Run&)>& on_attach) {
  uint64_t attachment;
  {
    codemode::MutexLock lock(&run->mu);
    // Refused before anything of the request is applied: a refused retry's answer must
    // not approve the call.
    if (run->collected) return absl::FailedPreconditionError(kRunGone);  // on its way out
    if (run->attached) {
      return absl::FailedPreconditionError("another request is already waiting for this run");
    }
    if (on_attach) on_attach(*run);
    run->attached = true;
    run->waiter = &ctx;
    run->request_cancelled = false;
    attachment = ++run->attachment;
  }
  // The request's cancellation (notifications/cancelled, a dropped connection) cancels the
  // run, while this request waits for it.
  std::weak_ptr<Run> weak = run;
  ctx.cancel->OnCancel([weak, attachment] {
    auto r = weak.lock();
    if (!r) return;
    {
      codemode::MutexLock lock(&r->mu);
      if (!r->attached || r->attachment != attachment) return;
      r->request_cancelled = true;
    }
    r->own.cancel->Cancel("the client cancelled the request");
  });
  std::optional<absl::StatusOr<json>> result;
  {
    codemode::MutexLock lock(&run->mu);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run->mu) {
      return run->result.has_value() || (run->asking && !run->sent) || run->request_cancelled;
    };
    run->mu.Await(absl::Condition(&ready));
    run->attached = false;
    run->waiter = nullptr;
    // A cancelled request is answered by its cancellation, also when the run it cancelled
    // has ended by the time this thread holds the lock again (under load the run's thread
    // often gets there first). The run's result stays for a retry of the same state.
    if (run->request_cancelled) {
      if (run->result) KeepResult(*run);
      return absl::CancelledError("the request was cancelled");
    }
    if (!run->result) return run->InputRequired(*sealer_, options_.keep);
    result = std::move(run->result);
    run->result = absl::CancelledError("collected");  // still finished for Sweep()
    run->collected = true;
    run->kept.reset();
  }
  // Collected: the run is done with. (The registry's lock is never taken under a run's.)
  codemode::MutexLock registry(&mu_);
  runs_.erase(run->id);
  return std::move(*result);
}

}  // namespace gateway
