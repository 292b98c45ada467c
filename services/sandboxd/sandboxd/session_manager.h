// SessionManager: the policy core of sandboxd. Owns the registry of sessions, their limits,
// idle expiry and re-attachment after a daemon restart, over three components: the
// SandboxFactory (starts containers, knows readiness), the WarmPools (containers started
// ahead of time, one pool per runtime) and the SessionRecords (what a restarted daemon re-attaches from). The
// gRPC layer (grpc_service.h) only converts messages and maps status codes; the container
// backend sits behind ContainerRuntime.
//
//   SessionManager mgr(options, &runtime, &clock);
//   mgr.Start();                       // probe, re-attach, fill the pool
//   absl::StatusOr<sandbox::v1::Session> s = mgr.CreateSession(request);
//   if (!s.ok()) return s.status();
//   mgr.Execute(s->id(), {.code = "print(1)"}, observer);
//   mgr.Shutdown();                    // sessions' containers stay for the next start
//
// Safe for concurrent use.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "sandbox/v1/sandbox.pb.h"
#include "sandboxd/async.h"
#include "sandboxd/container_runtime.h"
#include "sandboxd/images.h"
#include "sandboxd/lost_sessions.h"
#include "sandboxd/metrics.h"
#include "sandboxd/record_store.h"
#include "sandboxd/sandbox_factory.h"
#include "sandboxd/session.h"
#include "sandboxd/session_records.h"
#include "sandboxd/warm_pool.h"

namespace sandboxd {

struct ManagerOptions {
  std::string state_dir;    // session records and per-container socket directories
  std::string image;        // reported by GetInfo; the runtime starts it
  std::string runner_path;     // host path of sandbox_runner.pyz
  std::string js_runner_path;  // host path of sandbox_runner.js; empty: no JavaScript sessions
  ResolvedLimits default_limits;
  ResolvedLimits max_limits;
  IsolationPolicy isolation;  // the default isolation and those clients may ask for
  uint32_t max_sessions = 64;
  // Creations that may wait together for containers still starting for callers that gave
  // up (each holds an RPC thread meanwhile): main sets a quarter of --max_rpc_threads.
  uint32_t max_waiting_creations = 32;
  // Sessions one owner (CreateSessionRequest.owner; the gateway sends "mcp:<credential>")
  // may hold at once, so one client cannot take every slot.
  uint32_t max_sessions_per_owner = 32;
  // A lost session frees its slot at once; its id keeps answering "session lost: <reason>"
  // for this long, unless deleted first or pushed out past max_lost_sessions
  // (lost_sessions.h).
  absl::Duration lost_session_ttl = absl::Minutes(30);
  uint32_t max_lost_sessions = 1024;
  uint32_t pool_size = 2;  // warm Python containers of the default config (--pool_size)
  // Warm JavaScript containers of the default config (--js_pool_size); none while this
  // daemon cannot run JavaScript (no js_runner_path, or an image that does not offer it).
  uint32_t js_pool_size = 1;
  // How far misses raise each pool (--pool_max, --js_pool_max; at most its size: fixed),
  // and how long after the last miss it stays raised (--pool_shrink_after). warm_pool.h.
  uint32_t pool_max = 0;
  uint32_t js_pool_max = 0;
  absl::Duration pool_shrink_after = absl::Minutes(5);
  // How often the JavaScript pool, while it cannot run, asks again (with a fresh look at
  // the image: one rebuilt with nodejs is noticed within this plus the image cache's 5 s).
  absl::Duration js_pool_recheck = absl::Seconds(30);
  absl::Duration idle_ttl = absl::Minutes(30);
  // How long the start waits for the images' first inspection before the daemon serves
  // (--start_images_wait): GetInfo lists no images until it answers. Bounded, so that a
  // podman hanging on image commands does not outlast systemd's start timeout.
  absl::Duration start_images_wait = absl::Seconds(5);
  // How long the start waits for the container runtime's first answer (and the previous
  // run's sessions re-attached) before the daemon serves (--start_runtime_wait; with
  // `background` only).
  absl::Duration start_runtime_wait = absl::Seconds(15);
  uint64_t max_code_bytes = 1u << 20;
  std::vector<std::string> container_env;  // KEY=VALUE passed into every container
  absl::Duration runner_start_timeout = absl::Seconds(20);
  // The per-session uids (FactoryOptions, --session_uid_range).
  uint32_t session_uid_first = 10000;
  uint32_t session_uid_count = 8192;
  // Per-execution settings (max_timeout_ms, max_output_bytes, max_queue, kill_grace).
  uint32_t max_timeout_ms = 600000;
  uint64_t max_output_bytes = 1u << 20;
  uint64_t max_file_bytes = 64u << 20;  // UploadFile / DownloadFile, per file
  uint64_t max_display_bytes = 2u << 20;  // per execution, at most kMaxDisplayBytes
  // NAME=REFERENCE images clients may ask for besides `image` (ImageSet, --images).
  std::vector<std::string> images;
  uint32_t max_queue = 16;
  absl::Duration kill_grace = absl::Seconds(2);
  // The CPU sandboxd spends on one session's runner frames (SessionEnv::runner_share).
  RunnerCpuShare runner_share;
  std::string version = "dev";
  // Where sessions, executions and tool calls are counted (it outlives the manager);
  // nullptr: a private one nobody serves (tests, --self_check).
  SandboxdMetrics* metrics = nullptr;
  // Egress by policy (docs/egress.md); null: sessions may have none (a policy that allows
  // something gives FAILED_PRECONDITION). Outlives the manager.
  EgressService* egress = nullptr;
  // How long a runner may take to turn its egress relay on.
  absl::Duration egress_on_timeout = absl::Seconds(5);
  // Background work: the pool filler (which also re-checks a failing runtime) and the idle
  // reaper. Off for one-shot uses such as `sandboxd --self_check`.
  bool background = true;
};

// What every call answers for an id it does not know (NOT_FOUND), the id escaped and
// clipped (codemode::LogQuoted): it is the caller's bytes.
absl::Status UnknownSessionError(const std::string& id);

class SessionManager final : private SlotKeeper, private SandboxdMetrics::StateSource {
 public:
  // `records` keeps the session records; nullptr: files under `<state_dir>/sessions`.
  SessionManager(ManagerOptions options, ContainerRuntime* runtime, Clock* clock,
                 RecordStore* records = nullptr);
  ~SessionManager();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // Probes the runtime, re-attaches to the sessions of a previous run, removes every
  // other container of this instance, and starts the pool and the idle reaper. A runtime
  // that is unavailable is not fatal: it is logged, reported by GetInfo, and probed again
  // on the next CreateSession.
  // Its waits for the runtime end at `wait`'s deadline (the daemon's --start_runtime_wait,
  // shared with the waits before it), or at once when `wait` says a stop was requested (a
  // SIGTERM during the start): then nothing more starts (no pool, no images' inspection,
  // no reaper) and the caller stops.
  absl::Status Start(const StartWait& wait);
  // The same with start_runtime_wait from now and no stop request.
  absl::Status Start();

  // Refuses new creations (UNAVAILABLE), also those waiting for room, while the calls under
  // way drain; Shutdown implies it. A container runtime's call (a podman command) still
  // under way at `calls_end_by` ends then, so that a hung podman holds neither the drain
  // nor the stop after it; what it leaves is swept by the next start.
  void Drain(absl::Time calls_end_by = absl::InfiniteFuture());
  // Stops the pool (removing its containers) and detaches sessions without killing
  // their containers, so the next daemon re-attaches; returns when the manager's
  // background work has ended (work posted later is dropped). Idempotent.
  void Shutdown();

  // With r.reclaim_idle, an owner at a limit gets room by ending its least recently used
  // idle session (sandbox.proto, CreateSessionRequest.reclaim_idle). `wanted`, when given,
  // is asked once the container is there and before another session is ended for room:
  // false (its caller gave up) ends the creation with CANCELLED, having ended nothing. It
  // is also asked, under the manager's lock, by other creations counting the room this one
  // holds: it must be cheap, take no lock of the manager's, and stay false once false.
  using Wanted = std::function<bool()>;
  absl::StatusOr<sandbox::v1::Session> CreateSession(const sandbox::v1::CreateSessionRequest& r,
                                                     const Wanted& wanted = nullptr);
  // A lost session's id answers (until deleted, or its tombstone expires): GetSession and
  // ListSessions with state LOST and the reason; every other call FAILED_PRECONDITION.
  absl::StatusOr<sandbox::v1::Session> GetSession(const std::string& id);
  // UNAVAILABLE until the previous run's sessions are re-attached: an empty list then would
  // say they are gone.
  absl::StatusOr<std::vector<sandbox::v1::Session>> ListSessions(const std::string& owner);
  absl::Status DeleteSession(const std::string& id);
  // What the session's container uses now (sandbox.proto, SessionStats), read through the
  // runtime without the session's lock: it answers while code runs. With a non-empty
  // `owner`, another owner's session (live or lost) is NOT_FOUND as an unknown id is. Not
  // a use of the session for the idle reaper: watching a session does not keep it alive.
  absl::StatusOr<sandbox::v1::SessionStats> GetSessionStats(const std::string& id,
                                                            const std::string& owner);
  absl::StatusOr<sandbox::v1::Session> ResetSession(const std::string& id);
  // Narrows a session's egress policy (SetEgressPolicyRequest); a session of another owner
  // answers NOT_FOUND when `owner` is set.
  absl::StatusOr<sandbox::v1::Session> SetEgressPolicy(const std::string& id,
                                                       const std::string& policy,
                                                       const std::string& owner);

  // Validates (code size, non-empty code) and queues an execution.
  absl::StatusOr<std::shared_ptr<Execution>> Execute(const std::string& session_id,
                                                     ExecutionRequest request,
                                                     std::shared_ptr<ExecutionObserver> observer);

  // The session for a file transfer: NOT_FOUND, or FAILED_PRECONDITION when it is lost;
  // counts as use for the idle reaper.
  absl::StatusOr<std::shared_ptr<Session>> SessionForFiles(const std::string& id);

  sandbox::v1::Info GetInfo();

  Readiness readiness();
  // Called with the current readiness at once and then on every change, serialised, from
  // whichever thread noticed the change (no manager lock held). nullptr unregisters; after
  // it returns no call is in progress.
  void SetReadinessListener(std::function<void(const Readiness&)> listener);

  // A stable id of this daemon instance, derived from the state directory; container
  // labels carry it.
  const std::string& instance() const { return instance_; }

  // Where this manager counts (ManagerOptions::metrics, or its private one); the file rpcs
  // count their bytes there too.
  SandboxdMetrics& metrics() { return *metrics_; }

 private:
  // The session as GetSession tells it: its own state, and for wasm the layers around it.
  sandbox::v1::Session Describe(const Session& session);
  // Info.isolations: each isolation, whether it runs here, and the wasm layers.
  void DescribeIsolations(const std::optional<RuntimeInfo>& runtime, const std::string& runtime_error,
                          sandbox::v1::Info* info);
  // SandboxdMetrics::StateSource: what the scrape-time gauges read.
  size_t sessions_active() override;
  size_t pool_ready(Language language) override { return pools_.pool(language).ready(); }
  size_t pool_target(Language language) override { return pools_.target(language); }
  size_t containers_failing_removal() override { return factory_.removals_failing(); }
  size_t containers_awaiting_removal() override { return factory_.removals_awaiting(); }
  // DeleteSession; a live session deleted ends for `reason` (closed by its client, or
  // expired by the idle reaper).
  absl::Status DeleteFor(const std::string& id, SandboxdMetrics::EndReason reason);
  // What CheckRoom holds for a creation it admits (holds_), until Register takes it over or
  // the creation gives it back (GiveBack) because it failed first. Creations over a limit
  // are refused before they take a warm container (and count as its misses) or start one.
  struct Hold {
    uint64_t id = 0;  // its key in holds_
  };
  // CreateSession once the request is valid and admitted (`hold`: CheckRoom's): takes a
  // pooled container or starts one, and registers the session.
  absl::StatusOr<sandbox::v1::Session> CreateAdmitted(const sandbox::v1::CreateSessionRequest& r,
                                                       const SandboxConfig& config,
                                                       const ImageChoice& image,
                                                       Catalog catalog,
                                                       const std::string& egress_policy,
                                                       Hold hold, const Wanted& wanted);
  // session_egress.cc: the policy a CreateSession gets (canonical; empty: no egress).
  absl::StatusOr<std::string> AdmitEgress(const sandbox::v1::CreateSessionRequest& r);
  // Turns the runner's relay on (waiting for its answer when `wait`) and opens the
  // session's proxy, its byte quota counting `bytes_used` already.
  absl::StatusOr<std::unique_ptr<SessionEgress>> OpenEgress(const Session::Metadata& md,
                                                            const std::string& policy,
                                                            RunnerConnection& conn,
                                                            bool wait = true,
                                                            uint64_t bytes_used = 0);
  std::string RelaySocket(const Session::Metadata& md) const;  // its egress.sock
  // The egress of a re-attached session with `recorded` policy and byte count; null, and
  // why in md->egress_lost_reason, when it can no longer have it.
  std::unique_ptr<SessionEgress> ReopenEgress(const std::string& recorded, uint64_t bytes_used,
                                              Session::Metadata* md, RunnerConnection& conn);
  // OK when `image` can run `language`: its runner is installed, and the image offers
  // it (an image without an io.sandboxd.offers label is tried as it is). CreateSession's
  // path takes the image cache as it is (`refresh_images` false: no podman inspect on a
  // create); the JavaScript pool's recheck refreshes a stale one.
  absl::Status CheckLanguage(Language language, const ImageChoice& image, bool refresh_images);
  // After a successful runtime probe, until it returns OK (the factory's on_probed).
  absl::Status OnProbed(const RuntimeInfo& info);
  // Start's probe, waited for as `wait` says: whether it answered OK by then.
  bool FirstProbe(const StartWait& wait);
  void OnReadinessChanged();
  void ReaperLoop();
  // Re-attaches the previous run's sessions and sweeps its other containers. UNAVAILABLE
  // when the runtime cannot list them: nothing is swept or re-attached, and the daemon is
  // not ready until a later probe can (a session left out would keep running uncounted).
  absl::Status Recover();
  // A connection to each record's runner (in the records' order), made all at once.
  std::vector<absl::StatusOr<std::unique_ptr<RunnerConnection>>> ConnectRunners(
      const std::vector<SessionRecord>& records,
      const std::map<std::string, ContainerSummary>& containers);
  // Re-attaches one recorded session over `conn`, its runner's connection; false (and why)
  // when it cannot be.
  bool Reattach(const SessionRecord& record,
                const std::map<std::string, ContainerSummary>& containers,
                absl::StatusOr<std::unique_ptr<RunnerConnection>> conn, std::string* why);
  // A live session; FAILED_PRECONDITION for a lost one, NoSuchSession for an unknown one.
  absl::StatusOr<std::shared_ptr<Session>> Find(const std::string& id);
  // What an id that is not (or not the caller's) answers: NOT_FOUND, or UNAVAILABLE until
  // the previous run's sessions are re-attached (one of them may be it; a gateway takes
  // NOT_FOUND for "gone" and forgets its binding).
  absl::Status NoSuchSession(const std::string& id);
  // Find, where a session of another owner than a non-empty `owner` (live or lost) answers
  // exactly as an unknown id does.
  absl::StatusOr<std::shared_ptr<Session>> FindOwned(const std::string& id,
                                                     const std::string& owner);
  // SlotKeeper: replaces a registered session that became lost by its tombstone,
  // so it no longer counts against the limits, and frees what it held (record, socket
  // directory, uid; its container is already being removed). Idempotent.
  void OnSessionLost(const Session& s) override;
  // A lost session taken out of sessions_ (OnSessionLost, or a reclaim), for FinishRetired.
  struct Retired {
    std::shared_ptr<Session> held;  // null: it was no longer registered
    std::vector<std::string> pushed_out;  // tombstones pushed out past max_lost_sessions
    std::string reclaimed;  // non-empty: it was reclaimed, for this reason
  };
  // Replaces `lost` (registered) by `tombstone` in lost_; nothing if it is not registered.
  Retired RetireLocked(const Session& lost, sandbox::v1::Session tombstone)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs, and frees on a worker what a retired session held (LetGo, with its record).
  void FinishRetired(Retired retired);
  // Frees, on a worker, what a session no longer registered holds: its record when
  // `remove_record`, its uid and reader thread, and its socket directory.
  void LetGo(std::shared_ptr<Session> s, bool remove_record);
  // Info.images, with what each offers and whether it is present: inspected when nothing is
  // known yet, otherwise the cache, refreshed on a worker once a few seconds old
  // (refresh_if_stale false leaves a stale cache as it is).
  std::vector<sandbox::v1::ImageInfo> ImageInfos(bool refresh_if_stale = true);
  // Inspects every image now, and caches what it finds.
  std::vector<sandbox::v1::ImageInfo> InspectImages();
  std::string NewId(const char* prefix);
  // How many sessions one CreateSession may leave `owner` with, and whether it may end an
  // idle one for room (CreateSessionRequest.max_owner_sessions and reclaim_idle).
  struct Room {
    std::string owner;
    uint32_t owner_limit = 0;  // 0: --max_sessions_per_owner alone
    bool reclaim_idle = false;
  };
  static Room RoomOf(const sandbox::v1::CreateSessionRequest& r) {
    return {r.owner(), r.max_owner_sessions(), r.reclaim_idle()};
  }
  // Which session a refused creation may end to make room: the least recently used idle
  // one of the owner in `owners` holding the most (then of the next), for `reason`.
  struct Reclaim {
    std::map<std::string, size_t> owners;  // owner -> sessions it holds
    std::string reason;                    // its lost reason
    bool empty() const { return owners.empty(); }
  };
  // Why a new session cannot be held now (RefuseLocked).
  struct Refusal {
    std::string why;  // "": it can
    // The sessions one of which, ended, would make room: at a full daemon those of owners
    // that hold more than the asking one would with the new session (fair share); else,
    // with room.reclaim_idle and a non-empty owner, the owner's own; else none.
    Reclaim reclaim;
    // Refused for containers still starting for callers that gave up (they count only as
    // containers against --max_sessions), or with a reclaim beside them at --max_sessions:
    // this many, one of which finishing may let it in.
    size_t finishing = 0;
    // Refused for the daemon's room alone: the owner is under its limit (RefusedForRoom).
    bool daemon_full = false;
    bool refused() const { return !why.empty(); }
  };
  // `self`: the hold of the creation asking (Register's), left out of the count of
  // containers starting for callers that gave up.
  Refusal RefuseLocked(const Room& room, uint64_t self = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many sessions `room.owner` may hold: the request may ask for less than the flag.
  uint32_t OwnerLimit(const Room& room) const;
  // Waits until fewer than `refusal.finishing` containers are still starting for callers
  // that gave up (their creations end once started; the hold `self`, the waiter's own, is
  // not one of them), until `until`, or until this creation's caller gives up too: OK to
  // check again, else RESOURCE_EXHAUSTED (`refusal.why`) or CANCELLED.
  absl::Status AwaitFinishing(const std::string& owner, const Wanted& wanted,
                              const Refusal& refusal, uint64_t self,
                              std::chrono::steady_clock::time_point until);
  // CreateSession's first check, before a container is taken or started: UNAVAILABLE when
  // stopping, RESOURCE_EXHAUSTED when there is no room and no idle session can be reclaimed
  // for it (one that other admitted creations have not claimed). Else what it holds.
  absl::StatusOr<Hold> CheckRoom(const Room& room, const Wanted& wanted);
  // GiveBack for a creation of `room` that failed with `refused`, which it returns, no
  // longer marked as the daemon's room (refusal.h) when the owner, with its other
  // creations under way, is at its limit: session user ids run out for an owner that
  // reclaims its own session refuse it for its limit.
  absl::Status GiveBackRefused(Hold hold, const Room& room, absl::Status refused);
  // Gives back what CheckRoom held for a creation that failed before Register.
  void GiveBack(Hold hold);
  // Holds room for a creation of `owner`, or with `reclaim`, a claim on an idle session of
  // its owners (see holds_); returns its key.
  uint64_t HoldLocked(const std::string& owner, const Wanted& wanted, const Reclaim* reclaim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each owner's live sessions and the rooms held for it (by_owner), and all rooms held
  // (rooms); rooms of creations whose callers gave up are not counted.
  struct Holders {
    std::map<std::string, size_t> by_owner;
    size_t rooms = 0;
  };
  Holders HoldersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Claims of `owner` under way on other owners' sessions (each lands as one of its own),
  // but for the hold `except`.
  size_t ClaimingLocked(const std::string& owner, uint64_t except) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Containers still starting for callers that gave up: the rooms HoldersLocked leaves out
  // and the claims not pinned yet, but for the hold `except`.
  size_t FinishingLocked(uint64_t except = 0) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "" when one more creation of `room.owner` may claim an idle session of `reclaim`
  // (`idle`: unpinned idle sessions by owner), else why not: fewer claims that may land on
  // those owners' sessions than idle ones, and, for another owner's session (a full
  // daemon's fair share), the owner within its limit and still holding fewer than its
  // victim once every claim under way has landed where ReclaimIdle would land it.
  std::string MayClaimLocked(const Room& room, const Reclaim& reclaim,
                             const std::map<std::string, size_t>& idle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers a new session (pinned, see pinned_) if there is room, reclaiming an idle
  // session (RefuseLocked) for it when needed and still `wanted`; else why not
  // (RESOURCE_EXHAUSTED, or CANCELLED). Takes over the room CheckRoom held for it (`hold`)
  // either way.
  absl::Status Register(const std::shared_ptr<Session>& session, const Room& room, Hold hold,
                        const Wanted& wanted);
  // What a creation of `owner` whose caller gave up (Wanted) ends with; logged.
  static absl::Status CallerGaveUp(const std::string& owner);
  // Ends the least recently used idle session of the owner in `reclaim` holding the most
  // (then of the next) and returns it, pinned and still registered (Register retires it);
  // null when none is idle. Marks the claim `held` pinned while its victim is.
  std::shared_ptr<Session> ReclaimIdle(const Reclaim& reclaim, uint64_t held);
  // How many idle sessions not pinned each owner has (a hint: it may change at once).
  std::map<std::string, size_t> IdleSessions();
  // The sessions of `reclaim`'s owners that may be reclaimed: registered and not pinned.
  std::vector<std::shared_ptr<Session>> ReclaimableOf(const Reclaim& reclaim);

  const ManagerOptions options_;
  const std::unique_ptr<SandboxdMetrics> owned_metrics_;  // when options_.metrics is null
  SandboxdMetrics* const metrics_;
  ContainerRuntime* const runtime_;
  Clock* const clock_;
  const std::string instance_;
  const std::unique_ptr<RecordStore> owned_store_;
  const absl::StatusOr<ImageSet> images_;  // Start() fails with its error
  SessionRecords records_;
  TimerQueue timers_;
  WorkerPool workers_{2};
  SessionEnv env_;
  // After the workers (it posts removals to them), before the pools (which start through it).
  SandboxFactory factory_;
  WarmPools pools_;

  codemode::Mutex mu_;
  // Live sessions: those counted against max_sessions and max_sessions_per_owner.
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  // Registered sessions a CreateSession is working on: the one it reclaims, and its new one
  // until its record is written. Never reclaimed; OnSessionLost leaves them to that
  // CreateSession, which looks at them again once it unpins them.
  std::set<std::string> pinned_ ABSL_GUARDED_BY(mu_);
  // What CheckRoom holds for creations that have not registered yet (Hold): room, counted
  // as a session of its owner, or a claim on an idle session to reclaim (from CheckRoom, or
  // from Register when another creation took its room), counted against the idle sessions
  // until its victim is pinned, and until it registers as a session its owner holds and one
  // its victim's owner has lost. A creation whose caller gave up holds nothing from then on
  // but a pinned victim: its room and its unpinned claim are other creations' at once.
  struct Held {
    std::string owner;
    Wanted wanted;                      // null: wanted to the end
    std::set<std::string> victims;      // a claim: whose sessions it may reclaim; empty: room
    std::optional<std::string> pinned;  // a claim's pinned victim's owner (ReclaimIdle)
    bool counts() const { return pinned || !wanted || wanted(); }
  };
  std::map<uint64_t, Held> holds_ ABSL_GUARDED_BY(mu_);
  uint64_t last_hold_ ABSL_GUARDED_BY(mu_) = 0;
  // Sessions pinned or let go of by ReclaimIdle, ever: CheckRoom counts idle sessions
  // again when this moved while it counted.
  uint64_t pins_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reclaimed_total_ ABSL_GUARDED_BY(mu_) = 0;
  LostSessions lost_ ABSL_GUARDED_BY(mu_) = LostSessions(options_.max_lost_sessions);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // Drain, or stopping
  // Creations waiting in AwaitFinishing, by owner: at most one of each owner per container
  // they wait for, and max_waiting_creations of all owners.
  std::map<std::string, size_t> awaiting_finish_ ABSL_GUARDED_BY(mu_);
  size_t awaiting_finish_total_ ABSL_GUARDED_BY(mu_) = 0;  // its sum
  // Serialises listener calls so they arrive in order; never taken while holding mu_.
  codemode::Mutex listener_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::function<void(const Readiness&)> listener_ ABSL_GUARDED_BY(listener_mu_);
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  std::thread reaper_thread_;
  codemode::Mutex images_mu_;
  std::vector<sandbox::v1::ImageInfo> image_infos_ ABSL_GUARDED_BY(images_mu_);
  int64_t image_infos_at_ms_ ABSL_GUARDED_BY(images_mu_) = 0;  // clock_
  bool image_infos_refreshing_ ABSL_GUARDED_BY(images_mu_) = false;
};

}  // namespace sandboxd
