// UpstreamManager (see manager.h): one background thread per upstream owns its
// connection. The thread connects, retries with exponential backoff while that fails,
// refreshes the tool list on notifications/tools/list_changed, and reconnects after a
// disconnect. Callers only read the shared state and borrow the current McpClient.
//
// All state lives under one mutex (a handful of upstreams, no I/O under the lock); one
// condition variable wakes both the connection threads and the waiters.
#include <atomic>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "base/thread.h"
#include "absl/strings/str_cat.h"
#include "upstream/manager.h"
#include "upstream/client.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using nlohmann::json;

struct UpstreamManager::Impl {
  struct Upstream {
    UpstreamConfig config;
    size_t index = 0;  // of its State in `states`
    std::thread thread;
  };
  // What an upstream's thread finds out and its callers read, under mu.
  struct State {
    bool connected = false;
    std::string error = "not connected yet";
    std::string server_name;
    std::string instructions;
    std::vector<UpstreamTool> tools;
    std::shared_ptr<McpClient> client;      // while connected
    std::shared_ptr<McpClient> connecting;  // while a Connect() runs (Stop() aborts it)
    uint64_t attempts = 0;                  // finished connect attempts
    uint64_t connections = 0;               // successful ones
    bool reconnect_now = false;             // a CallTool wants a dead stdio server back
    bool refresh_tools = false;             // list_changed arrived
  };

  UpstreamOptions options;
  std::vector<std::unique_ptr<Upstream>> upstreams;

  mutable codemode::Mutex mu;
  std::vector<State> states ABSL_GUARDED_BY(mu);  // one per upstream, by Upstream::index
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;

  codemode::Mutex stop_mu;  // serializes Stop()
  std::atomic<uint64_t> version{0};
  codemode::Mutex listener_mu;
  std::function<void()> listener ABSL_GUARDED_BY(listener_mu);

  State& Of(const Upstream* u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return states[u->index]; }

  Upstream* Find(const std::string& name) const {
    for (auto& u : upstreams) {
      if (u->config.name == name) return u.get();
    }
    return nullptr;
  }

  // The catalog changed: tell the listener (no lock held). The version is bumped by the
  // caller inside the same critical section that changed the catalog, so a reader that
  // sees the new state also sees the new version.
  void Notify(bool notify) {
    if (!notify) return;
    std::function<void()> copy;
    {
      codemode::MutexLock lock(&listener_mu);
      copy = listener;
    }
    if (copy) copy();
  }

  void Run(Upstream* u) ABSL_LOCKS_EXCLUDED(mu);
  // Records why `u` is not connected (after a connection, or a failed attempt), logs it, and
  // closes `client`; releases mu meanwhile.
  void GoneDown(Upstream* u, const std::shared_ptr<McpClient>& client, std::string error,
                bool was_connected, absl::Duration backoff) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Serves a connected client until it disconnects or Stop(); refreshes tools meanwhile.
  void Serve(Upstream* u, const std::shared_ptr<McpClient>& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

void UpstreamManager::Impl::Run(Upstream* u) {
  absl::Duration backoff = options.retry_initial;
  mu.Lock();
  while (!stopping) {
    bool lasted = false;  // connected, and stayed so for a while
    McpClient::Handlers handlers;
    handlers.on_tools_list_changed = [this, u] {
      codemode::MutexLock l(&mu);
      Of(u).refresh_tools = true;
    };
    // The client's own connected() flag is already false; just wake the thread.
    handlers.on_disconnected = [this](const std::string&) {
      codemode::MutexLock l(&mu);
    };
    auto client = std::make_shared<McpClient>(u->config, options, std::move(handlers));
    Of(u).connecting = client;
    Of(u).refresh_tools = false;
    mu.Unlock();
    absl::Status status = client->Connect();
    mu.Lock();
    Of(u).connecting.reset();
    ++Of(u).attempts;

    if (status.ok() && !stopping) {
      Of(u).client = client;
      Of(u).connected = true;
      ++Of(u).connections;
      Of(u).error.clear();
      Of(u).server_name = client->server_name();
      Of(u).instructions = client->instructions();
      Of(u).tools = client->tools();
      ++version;
      mu.Unlock();
      Notify(true);
      mu.Lock();
      const absl::Time connected_at = absl::Now();
      Serve(u, client);
      // Only a connection that lasted starts the backoff over: one the upstream ends at once
      // must not have us reconnect every retry_initial, nor one we cut for its fault however
      // long it lasted (a legacy SSE stream whose event stalls for 30 s would otherwise be
      // reconnected every 31 s).
      lasted = absl::Now() - connected_at >= options.stream_retry.lived &&
               !client->cut_for_misbehaviour();
      if (lasted) backoff = options.retry_initial;
      // Disconnected (or stopping).
      Of(u).client.reset();
      Of(u).connected = false;
      Of(u).tools.clear();
      GoneDown(u, client, stopping ? "stopped" : client->disconnect_reason(), true, backoff);
    } else {
      GoneDown(u, client, stopping ? "stopped" : std::string(status.message()), false, backoff);
    }
    if (stopping) break;
    auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || Of(u).reconnect_now; };
    mu.AwaitWithTimeout(absl::Condition(&wake), backoff);
    Of(u).reconnect_now = false;
    if (!lasted) backoff = std::min(backoff * 2, options.retry_max);
  }
  mu.Unlock();
}

void UpstreamManager::Impl::GoneDown(Upstream* u, const std::shared_ptr<McpClient>& client,
                                     std::string error, bool was_connected,
                                     absl::Duration backoff) {
  // A lost connection changes the tool list; a failed attempt only the reason descriptions
  // show, which needs no list_changed.
  if (was_connected || error != Of(u).error) ++version;
  Of(u).error = std::move(error);
  // Logged as it is decided, before Close waits for the upstream to go (up to stop_grace): a
  // client that reads the reason in a description finds it in the log too.
  if (!stopping) {
    spdlog::warn("upstream {}: {}; {} in {}", u->config.name, codemode::LogLongText(Of(u).error),
                 was_connected ? "reconnecting" : "retrying", absl::FormatDuration(backoff));
  }
  const bool notify = was_connected && !stopping;  // no listener calls while shutting down
  mu.Unlock();
  client->Close();
  Notify(notify);
  mu.Lock();
}

// Whether two tool lists are the same in all a client reads and the gateway decides by (a
// refresh that changed nothing is not worth a notification to every MCP session). The
// annotations decide which calls need approval; the parameter headers follow from the
// input schema.
static bool SameTools(const std::vector<UpstreamTool>& a, const std::vector<UpstreamTool>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].description != b[i].description ||
        a[i].input_schema != b[i].input_schema || a[i].output_schema != b[i].output_schema ||
        a[i].annotations != b[i].annotations) {
      return false;
    }
  }
  return true;
}

void UpstreamManager::Impl::Serve(Upstream* u, const std::shared_ptr<McpClient>& client) {
  // The client's connected() changes without mu, but its on_disconnected handler takes mu
  // afterwards, and that unlock re-evaluates these.
  auto gone = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return stopping || !client->connected();
  };
  auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return gone() || Of(u).refresh_tools; };
  // A flood of list_changed is coalesced: they only set refresh_tools, one tools/list runs
  // at a time, at most one per min_tools_refresh_interval, and each notifies the MCP
  // sessions at most once (not at all when the tools did not change). Otherwise every
  // refresh would be broadcast to every session, as fast as the upstream could answer.
  codemode::SteadyTime last_refresh = codemode::SteadyTime::min();
  for (;;) {
    // A list given with ttlMs is asked again when that runs out (the stateless revision's
    // caching hint), besides when the server says it changed.
    const codemode::SteadyTime expire = client->tools_expire();
    if (expire == codemode::SteadyTime::max()) {
      mu.Await(absl::Condition(&wake));
    } else if (!mu.AwaitWithDeadline(absl::Condition(&wake), expire)) {
      Of(u).refresh_tools = true;
    }
    if (gone()) return;
    if (mu.AwaitWithDeadline(absl::Condition(&gone),
                             codemode::SteadyAfter(last_refresh, options.min_tools_refresh_interval))) {
      return;
    }
    Of(u).refresh_tools = false;
    last_refresh = std::chrono::steady_clock::now();
    // Not on the transport thread that delivered list_changed: the tools/list response
    // may need that very thread.
    mu.Unlock();
    auto tools = client->ListTools(options.connect_timeout);
    mu.Lock();
    if (!tools.ok()) {
      spdlog::warn("upstream {}: refreshing tools failed: {}", u->config.name,
                   codemode::LogLongText(tools.status().message()));
      continue;
    }
    if (gone()) return;
    if (SameTools(Of(u).tools, *tools)) continue;
    Of(u).tools = *std::move(tools);
    spdlog::info("upstream {}: tool list changed ({} tools)", u->config.name, Of(u).tools.size());
    ++version;
    mu.Unlock();
    Notify(true);
    mu.Lock();
  }
}

UpstreamManager::UpstreamManager(std::vector<UpstreamConfig> configs, UpstreamOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  for (auto& config : configs) {
    auto u = std::make_unique<Impl::Upstream>();
    u->config = std::move(config);
    u->index = impl_->upstreams.size();
    impl_->upstreams.push_back(std::move(u));
  }
  codemode::MutexLock lock(&impl_->mu);
  impl_->states.resize(impl_->upstreams.size());
}

UpstreamManager::~UpstreamManager() { Stop(); }

void UpstreamManager::Start() {
  codemode::MutexLock lock(&impl_->mu);
  if (impl_->started || impl_->stopping) return;
  impl_->started = true;
  for (auto& u : impl_->upstreams) {
    if (u->config.disabled) {
      impl_->Of(u.get()).error = "disabled";
      continue;
    }
    Impl::Upstream* raw = u.get();
    u->thread = codemode::StartThread("upstream " + raw->config.name, [this, raw] { impl_->Run(raw); });
  }
}

void UpstreamManager::WaitInitial(absl::Duration timeout) {
  codemode::MutexLock lock(&impl_->mu);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
    if (impl_->stopping) return true;
    for (auto& u : impl_->upstreams) {
      if (!u->config.disabled && impl_->Of(u.get()).attempts == 0) return false;
    }
    return true;
  };
  impl_->mu.AwaitWithTimeout(absl::Condition(&settled), timeout);
}

void UpstreamManager::Stop() {
  codemode::MutexLock stop_lock(&impl_->stop_mu);
  std::vector<std::shared_ptr<McpClient>> connecting;
  {
    codemode::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    for (auto& u : impl_->upstreams) {
      if (const auto& c = impl_->Of(u.get()).connecting) connecting.push_back(c);
    }
  }
  // A Connect() in progress would otherwise run into connect_timeout.
  for (auto& client : connecting) client->Close();
  for (auto& u : impl_->upstreams) {
    if (u->thread.joinable()) u->thread.join();
  }
}

std::vector<UpstreamStatus> UpstreamManager::Snapshot() const {
  codemode::MutexLock lock(&impl_->mu);
  std::vector<UpstreamStatus> out;
  for (auto& u : impl_->upstreams) {
    UpstreamStatus s;
    s.name = u->config.name;
    s.type = u->config.type;
    const Impl::State& state = impl_->Of(u.get());
    s.connected = state.connected;
    if (!state.connected) s.error = state.error;
    s.server_name = state.server_name;
    s.instructions = state.instructions;
    s.tools = state.tools;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<UpstreamHealth> UpstreamManager::Health() const {
  codemode::MutexLock lock(&impl_->mu);
  std::vector<UpstreamHealth> out;
  out.reserve(impl_->upstreams.size());
  for (auto& u : impl_->upstreams) {
    const Impl::State& state = impl_->Of(u.get());
    out.push_back({u->config.name, state.connected, state.tools.size(),
                   state.connections > 0 ? state.connections - 1 : 0});
  }
  return out;
}

uint64_t UpstreamManager::catalog_version() const { return impl_->version.load(); }

void UpstreamManager::SetCatalogListener(std::function<void()> listener) {
  codemode::MutexLock lock(&impl_->listener_mu);
  impl_->listener = std::move(listener);
}

absl::StatusOr<json> UpstreamManager::CallTool(const std::string& server,
                                               const std::string& tool,
                                               const json& arguments,
                                               const CallOptions& options) {
  Impl::Upstream* u = impl_->Find(server);
  if (u == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown upstream server \"", server, "\""));
  }
  std::shared_ptr<McpClient> client;
  {
    codemode::MutexLock lock(&impl_->mu);
    if (impl_->stopping) return absl::UnavailableError("shutting down");
    Impl::State& state = impl_->Of(u);
    if (!state.connected && u->config.type == UpstreamConfig::Type::kStdio && impl_->started &&
        !u->config.disabled) {
      // A stdio server that died comes back on demand: ask its thread to reconnect now
      // and wait for that attempt.
      const uint64_t attempts = state.attempts;
      state.reconnect_now = true;
      auto attempted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
        return impl_->stopping || impl_->Of(u).connected || impl_->Of(u).attempts > attempts;
      };
      impl_->mu.AwaitWithTimeout(absl::Condition(&attempted), impl_->options.connect_timeout);
    }
    if (!state.connected) {
      return absl::UnavailableError(
          absl::StrCat("upstream \"", server, "\" is not connected: ", state.error));
    }
    bool known = false;
    for (const auto& t : state.tools) known |= t.name == tool;
    if (!known) {
      return absl::NotFoundError(
          absl::StrCat("unknown tool \"", tool, "\" on upstream \"", server, "\""));
    }
    client = state.client;
  }
  absl::Duration timeout =
      options.timeout > absl::ZeroDuration() ? options.timeout : impl_->options.call_timeout;
  absl::StatusOr<json> result = client->CallTool(tool, arguments, options, timeout);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("upstream \"", server, "\" tool \"", tool,
                                     "\": ", result.status().message()));
  }
  return result;
}

}  // namespace gateway
