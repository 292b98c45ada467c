// SandboxClient::Execute: one Execute stream, its tool calls handed to a ToolCallDispatcher,
// a cancel that never waits on the stream, and a flood's reading at a lower CPU priority.
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "base/thread.h"
#include "base/thread_pool.h"
#include "bridge/grpc_call.h"
#include "bridge/sandbox_client.h"
#include "bridge/sandboxd_endpoints.h"
#include "bridge/tool_call_dispatcher.h"
#include "metrics/stage_times.h"
#include "spdlog/spdlog.h"

namespace gateway {

namespace {

// Writes one Execute stream for its loop, its tool-call workers and a cancel, which may
// come after the stream ended (such writes are dropped).
struct StreamWriter {
  codemode::Mutex mu;  // held for the whole of a write: one blocks while sandboxd does not read
  bool done ABSL_GUARDED_BY(mu) = false;
  grpc::ClientReaderWriter<sandbox::v1::ExecuteRequest, sandbox::v1::ExecuteResponse>* stream;
  absl::Notification ended;  // sandboxd ended the stream (or the call failed)
  void Write(const sandbox::v1::ExecuteRequest& req) {
    codemode::MutexLock lock(&mu);
    if (!done) stream->Write(req);
  }
  // Later writes are dropped; waits for a write in progress.
  void Close() {
    codemode::MutexLock lock(&mu);
    done = true;
    stream->WritesDone();
  }
};

// Cancels an execution without ever waiting on its stream. Normally the `cancel` message
// goes out at once and sandboxd ends the stream with `finished` (CANCELLED, or
// SESSION_LOST once code that ignores the interrupt is killed after sandboxd's
// --kill_grace). But code that reads none of its tool calls' answers can back the stream
// up: a write of an answer blocks holding the writer, the Execute loop waits behind it,
// and a cancel written behind them would wait until sandboxd's timeout ends the run. So
// the message is written by a thread of its own, and when the stream has not ended within
// `grace` the call itself is cancelled: the blocked writes fail, and sandboxd interrupts
// the code as for a caller that went away (and kills it when it does not stop). Both run
// on `threads`, which Execute stops before it returns: a cancel after that is refused
// there, and has nothing left to stop.
void CancelExecution(codemode::ThreadPool& threads, const std::shared_ptr<StreamWriter>& writer,
                     const std::shared_ptr<ContextRef>& context, absl::Duration grace) {
  if (writer->ended.HasBeenNotified()) return;  // a cancel after the run: nothing to stop
  (void)threads.Schedule([writer] {
    sandbox::v1::ExecuteRequest req;
    req.mutable_cancel();
    writer->Write(req);
  });
  (void)threads.Schedule([writer, context, grace] {
    if (writer->ended.WaitForNotificationWithTimeout(grace)) return;
    spdlog::warn("a cancelled run's Execute stream did not end within {} "
                 "(--sandbox_cancel_grace): cancelling the call to sandboxd",
                 absl::FormatDuration(grace));
    context->TryCancel();
  });
}

codemode::ThreadPoolOptions CancelOptions() {
  codemode::ThreadPoolOptions o;
  o.name = "execute cancel";
  o.max_threads = 2;  // the cancel's write and its grace
  return o;
}

// The Execute stream's first message.
sandbox::v1::ExecuteRequest StartRequest(const SandboxRef& ref, const std::string& code, uint32_t timeout_ms,
                                         const sandbox::v1::Catalog* catalog, const std::string& runtime,
                                         uint32_t max_in_flight) {
  sandbox::v1::ExecuteRequest start;
  start.mutable_start()->set_session_id(ref.session_id);
  start.mutable_start()->set_code(code);
  start.mutable_start()->set_timeout_ms(timeout_ms);
  // sandboxd's backstop: code of another language than the session's never runs there.
  start.mutable_start()->set_runtime(runtime);
  // The sandbox holds back calls past this many, so a flood waits there instead of
  // being refused here.
  start.mutable_start()->set_max_tool_calls_in_flight(max_in_flight);
  if (catalog) *start.mutable_start()->mutable_catalog() = *catalog;
  return start;
}

// One Execute stream's reading: output to the handlers, each tool call to `dispatch`, the
// Finished kept.
struct ExecuteReading {
  using Stream =
      grpc::ClientReaderWriterInterface<sandbox::v1::ExecuteRequest, sandbox::v1::ExecuteResponse>;
  ExecuteReading(Stream* s, const ExecuteHandlers& h, std::function<void(sandbox::v1::ToolCall)> d)
      : stream(s), handlers(h), dispatch(std::move(d)) {}

  Stream* const stream;
  const ExecuteHandlers& handlers;
  const std::function<void(sandbox::v1::ToolCall)> dispatch;
  uint32_t calls_read = 0;
  std::optional<sandbox::v1::Finished> finished;

  // Reads to the stream's end; with `bulk_at` > 0, returns true as its call number
  // `bulk_at` is dispatched, the rest unread.
  bool Read(uint32_t bulk_at) {
    sandbox::v1::ExecuteResponse msg;
    while (stream->Read(&msg)) {
      switch (msg.msg_case()) {
        case sandbox::v1::ExecuteResponse::kOutput:
          if (handlers.on_output) {
            handlers.on_output(msg.output().stream() == sandbox::v1::Output::STDERR,
                               msg.output().text());
          }
          break;
        case sandbox::v1::ExecuteResponse::kToolCall:
          dispatch(std::move(*msg.mutable_tool_call()));
          if (++calls_read == bulk_at) return true;
          break;
        case sandbox::v1::ExecuteResponse::kFinished:
          StageTimes::Mark(Stage::kFinishedRead);
          finished = msg.finished();
          break;
        default:
          break;
      }
    }
    return false;
  }
};

// A run past ToolCallLimits::bulk_run_calls is a flood: the rest of its stream is read
// at the tool-call workers' lower CPU priority, so that when the CPU is short it gives way
// to other clients' requests as its calls' answers already do. A raised nice value cannot
// be lowered again without privilege, so the reading moves to a thread of its own, which
// ends with the run, while the request's thread (which serves later requests) waits for
// it unchanged. Without a thread to be had, the request's thread reads on as it is. What
// the reading throws is thrown again on the request's thread, as if it had read.
void ReadAsBulk(const std::function<void()>& read_rest) {
  std::exception_ptr thrown;
  std::thread reader;
  try {
    reader = codemode::StartThread("bulk run", [&read_rest, &thrown] {
      codemode::LowerThreadPriority(ToolCallDispatcher::kWorkerNice);
      try {
        read_rest();
      } catch (...) {
        thrown = std::current_exception();
      }
    });
  } catch (const std::system_error&) {
    read_rest();
    return;
  }
  reader.join();
  if (thrown) std::rethrow_exception(thrown);
}

}  // namespace

absl::StatusOr<sandbox::v1::Finished> SandboxClient::Execute(
    const SandboxRef& ref, const std::string& code, uint32_t timeout_ms,
    const sandbox::v1::Catalog* catalog, const ExecuteHandlers& handlers,
    std::shared_ptr<codemode::CancelToken> cancel) {
  grpc::ClientContext ctx;
  // The server enforces the execution timeout; this deadline only guards against a
  // sandboxd that stops answering altogether.
  endpoints_->Prepare(ctx, ref.endpoint,
          std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms) +
              std::chrono::seconds(60));
  // W3C trace context over gRPC, as OpenTelemetry's propagators carry it: sandboxd's log
  // lines of this execution name the trace.
  if (!handlers.traceparent.empty()) ctx.AddMetadata("traceparent", handlers.traceparent);
  const SandboxdEndpoints::StubPtr stub = endpoints_->Stub(ref.endpoint);  // held while the stream lasts
  auto stream = stub->Execute(&ctx);
  // Shared with the cancel callback, which may fire after we return.
  auto writer = std::make_shared<StreamWriter>();
  writer->stream = stream.get();
  auto context = std::make_shared<ContextRef>(&ctx);
  auto write = [writer](const sandbox::v1::ExecuteRequest& req) { writer->Write(req); };

  write(StartRequest(ref, code, timeout_ms, catalog, handlers.runtime, limits_.max_in_flight));
  StageTimes::Mark(Stage::kStartWritten);
  // Shared with the cancel callback too; stopped (its threads joined) before we return.
  auto cancel_threads = std::make_shared<codemode::ThreadPool>(CancelOptions());
  if (cancel) {
    cancel->OnCancel([cancel_threads, writer, context, grace = limits_.cancel_grace] {
      CancelExecution(*cancel_threads, writer, context, grace);
    });
  }

  // Made at the execution's first tool call: most runs make none.
  std::optional<ToolCallDispatcher> calls;
  ExecuteReading reading{stream.get(), handlers, [&](sandbox::v1::ToolCall call) {
    if (!calls) calls.emplace(limits_, &budget_, handlers, write);
    calls->Dispatch(std::move(call));
  }};
  if (reading.Read(limits_.bulk_run_calls)) ReadAsBulk([&] { reading.Read(0); });
  StageTimes::Mark(Stage::kStreamEnded);
  writer->ended.Notify();
  if (handlers.on_stream_end) handlers.on_stream_end();
  writer->Close();
  // Late answers of tool-call threads are dropped by the writer.
  if (calls) calls->JoinAll();
  // The stream ended and its writer is closed: a cancel's write is dropped, its grace ends.
  cancel_threads->Stop();
  grpc::Status st = stream->Finish();
  context->Clear();  // a late cancel's fallback must not reach `ctx` once it is gone
  if (reading.finished || Reached(st)) endpoints_->Answered(ref.endpoint);
  if (reading.finished) return *reading.finished;
  if (st.ok()) return absl::InternalError("sandboxd ended the stream without 'finished'");
  if (st.error_code() == grpc::StatusCode::CANCELLED && cancel && cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(
        "the run was cancelled (", cancel->reason(), "); sandboxd did not end it within ",
        absl::FormatDuration(limits_.cancel_grace), " (--sandbox_cancel_grace), so the call to "
        "sandboxd was cancelled, which interrupts the code"));
  }
  return Convert(st, ref.endpoint);
}

}  // namespace gateway
