// sandboxd_bench's client side of sandboxd's gRPC api: Execute streams, unary rpcs,
// the warm-pool wait, and answering the "bench" catalog's tool calls.
#include "rpc.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sandboxd_bench {
namespace {

constexpr char kEchoResult[] = R"({"content":[{"type":"text","text":"x"}]})";

void SendEchoResult(const std::string& call_id, Stream* stream) {
  sb::ExecuteRequest r;
  r.mutable_tool_result()->set_call_id(call_id);
  r.mutable_tool_result()->set_result_json(kEchoResult);
  stream->Write(r);
}

}  // namespace

std::string ExecOutcome::Describe() const {
  if (!status.ok()) return absl::StrCat("grpc ", status.error_code(), ": ", status.error_message());
  if (!got_finished) return "stream ended without 'finished'";
  return absl::StrCat("Finished.status ", sb::Finished::Status_Name(finished.status()), " ",
                      finished.error().type(), ": ", finished.error().message().substr(0, 300));
}

ExecOutcome RunExecute(sb::SandboxService::Stub& stub, const sb::StartExecution& start,
                       const ToolCallFn& on_call, int deadline_ms,
                       const std::function<void()>& before_close) {
  ExecOutcome out;
  auto t0 = SteadyClock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(deadline_ms));
  std::unique_ptr<Stream> stream = stub.Execute(&ctx);
  sb::ExecuteRequest req;
  *req.mutable_start() = start;
  stream->Write(req);  // a failure shows up in Finish()
  sb::ExecuteResponse msg;
  while (stream->Read(&msg)) {
    if (msg.has_finished()) {
      out.finished = msg.finished();
      out.got_finished = true;
    } else if (msg.has_tool_call()) {
      ++out.tool_calls;
      if (on_call) on_call(msg.tool_call(), stream.get());
    }
  }
  if (before_close) before_close();
  stream->WritesDone();
  out.status = stream->Finish();
  out.wall_ms = MsSince(t0);
  return out;
}

sb::StartExecution MakeStart(const std::string& session_id, const std::string& code) {
  sb::StartExecution s;
  s.set_session_id(session_id);
  s.set_code(code);
  return s;
}

grpc::Status RunUnary(sb::SandboxService::Stub& stub, const std::string& session_id,
                      const std::string& code, sb::Finished* f, int deadline_ms) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(deadline_ms));
  sb::RunRequest req;
  req.set_session_id(session_id);
  req.set_code(code);
  return stub.Run(&ctx, req, f);
}

grpc::Status GetInfo(sb::SandboxService::Stub& stub, sb::Info* info) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(5000));
  return stub.GetInfo(&ctx, {}, info);
}

grpc::Status Create(sb::SandboxService::Stub& stub, const sb::CreateSessionRequest& req,
                    sb::Session* s, double* ms) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(120000));
  auto t0 = SteadyClock::now();
  grpc::Status st = stub.CreateSession(&ctx, req, s);
  if (ms) *ms = MsSince(t0);
  return st;
}

grpc::Status Delete(sb::SandboxService::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(60000));
  sb::DeleteSessionRequest req;
  req.set_session_id(id);
  sb::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

std::string StatusText(const grpc::Status& s) {
  return absl::StrCat(s.error_code(), ": ", s.error_message());
}

bool WaitPoolFull(sb::SandboxService::Stub& stub, int timeout_s, std::string* why) {
  auto t0 = SteadyClock::now();
  sb::Info info;
  for (;;) {
    grpc::Status st = GetInfo(stub, &info);
    // Every runtime's pool (info.pools); pool_ready/pool_target alone are Python's.
    bool full = st.ok() && info.pool_ready() >= info.pool_target();
    for (const sb::PoolInfo& pool : info.pools()) full = full && pool.ready() >= pool.target();
    if (full) return true;
    if (MsSince(t0) > timeout_s * 1000.0) {
      std::string pools;
      for (const sb::PoolInfo& pool : info.pools()) {
        absl::StrAppend(&pools, pool.runtime(), " ", pool.ready(), "/", pool.target(), " ");
      }
      *why = st.ok() ? absl::StrCat("pools hold ", pools, "after ", timeout_s, " s; notes: ",
                                    absl::StrJoin(info.notes(), "; "))
                     : StatusText(st);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

sb::Catalog BenchCatalog() {
  sb::Catalog c;
  sb::Server* s = c.add_servers();
  s->set_name("bench");
  s->set_description("benchmark tools");
  sb::Tool* t = s->add_tools();
  t->set_name("echo");
  t->set_description("Echoes its message.");
  t->set_input_schema_json(R"({"type":"object","properties":{"message":{"type":"string"}}})");
  return c;
}

void AnswerNow(const sb::ToolCall& call, Stream* stream) { SendEchoResult(call.call_id(), stream); }

void DelayedAnswerer::Add(const sb::ToolCall& call, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({SteadyClock::now() + delay_, call.call_id(), stream});
  cv_.notify_one();
}

void DelayedAnswerer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void DelayedAnswerer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Item it = queue_.front();  // all delays are equal: FIFO is due order
    queue_.pop_front();
    lock.unlock();
    std::this_thread::sleep_until(it.due);
    SendEchoResult(it.call_id, it.stream);
    lock.lock();
  }
}

}  // namespace sandboxd_bench
