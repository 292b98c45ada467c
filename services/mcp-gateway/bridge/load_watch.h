// LoadWatch: what placement knows of each sandboxd endpoint's load, kept fresh off the
// create path. Choosing an endpoint for a new sandbox needs every endpoint's GetInfo; asked
// on the create path it costs the slowest endpoint's round trip (2.1 ms p50 over TLS
// between network namespaces, 2 cores under load). While new sandboxes keep coming, a
// thread of its own asks every `refresh` and placement reads the last answers; an answer
// older than `max_age` (the first create after a quiet spell) is asked again on the path,
// as before. Sandboxes placed since an endpoint's last answer are counted in its load, so a
// burst between two answers spreads instead of piling onto one endpoint. An endpoint that
// did not answer (cut off, stalled) stays "not answered" until a later answer says
// otherwise. An endpoint whose creates hang while its GetInfo answers (podman stuck) is
// Stuck: placement puts it after those that make sandboxes (sandbox_client.h).
//
//   LoadWatch loads([&](const std::vector<size_t>& e) { return InfosOf(e); }, [&] { return Members(); }, {});
//   std::vector<std::optional<sandbox::v1::Info>> infos = loads.Infos(members);
//   ...
//   absl::Time sent = loads.Placing(members[k]);  // a create goes there
//   loads.PlaceDone(members[k], sent, LoadWatch::Ended::kCreated);
//
// Safe for concurrent use. The destructor stops the thread (before what `ask` uses goes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

class LoadWatch {
 public:
  // Each endpoint's GetInfo, asked at once; nullopt where one did not answer.
  using Ask = std::function<std::vector<std::optional<sandbox::v1::Info>>(const std::vector<size_t>& endpoints)>;
  // The endpoints new sandboxes may go to now (the thread asks these).
  using Members = std::function<std::vector<size_t>()>;

  struct Options {
    // How often the endpoints are asked while new sandboxes come.
    absl::Duration refresh = absl::Milliseconds(250);
    // An answer older than this is asked again on the create path.
    absl::Duration max_age = absl::Seconds(1);
    // The thread stops asking this long after the last Infos.
    absl::Duration active = absl::Seconds(30);
    // An endpoint is Stuck once a create has been out there this long with none answered
    // since it was sent. Far past a cold create (under a second, a few under load), and
    // within the 10 s a create's try waits there.
    absl::Duration stuck_after = absl::Seconds(5);
  };
  // How a create ended: a sandbox made, refused by the endpoint (an answer all the same), or
  // no answer (its try's deadline passed, or the gateway gave it up).
  enum class Ended { kCreated, kRefused, kNoAnswer };

  // What is kept of an answer (LoadOf): at most this many pools, each reason this long.
  static constexpr int kMaxPools = 8;
  static constexpr size_t kMaxReasonBytes = 1024;

  LoadWatch(Ask ask, Members members, Options options);
  ~LoadWatch();
  LoadWatch(const LoadWatch&) = delete;
  LoadWatch& operator=(const LoadWatch&) = delete;

  // Each of `endpoints`' last answer younger than max_age (its sessions raised, and its warm
  // pools lowered, by the sandboxes made there since it was asked for and the creates out), the others
  // asked now; an endpoint whose first ask is out already (the thread's) is waited for.
  // The thread asks the members every `refresh` from now on, until `active` passes without
  // a call; an endpoint is never asked twice at once.
  std::vector<std::optional<sandbox::v1::Info>> Infos(const std::vector<size_t>& endpoints);

  // A create was sent to `endpoint` now (the time returned): counted in its load until
  // PlaceDone, so creates that overlap (or hang there) spread over the endpoints.
  absl::Time Placing(size_t endpoint);
  // The create sent at `sent` ended; a sandbox made there stays counted until the
  // endpoint's next answer.
  void PlaceDone(size_t endpoint, absl::Time sent, Ended ended);
  // Whether `endpoint`'s creates hang: one has been out there for over stuck_after, and no
  // create there has been answered since it was sent. Creates that are only slow (every
  // endpoint's, under load) keep being answered, so their endpoints are not stuck once the
  // first is; one stuck before that ranks with the others, ahead of any not answering.
  bool Stuck(size_t endpoint);

 private:
  struct Seen {
    std::optional<sandbox::v1::Info> info;
    absl::Time at = absl::InfinitePast();  // when the last answer was asked for
    // Sandboxes made here (their creates answered), ever; as many as when the ask out was
    // sent; as many as the answer kept counts. One made while an ask was out may be missing
    // from its answer, so it stays counted until an answer asked after it.
    uint64_t made = 0;
    uint64_t made_at_ask = 0;
    uint64_t made_counted = 0;
    bool asking = false;  // an ask is in flight
    std::multiset<absl::Time> out;  // creates out, by when they were sent
    absl::Time answered_at = absl::InfinitePast();  // when a create there was last answered
  };
  // Its creates out, counted in its load.
  static uint32_t Out(const Seen& seen);
  // The sandboxes made there that its last answer may not count, and its creates out.
  static uint32_t Placed(const Seen& seen);
  // Marks those of `endpoints` that need asking (stale, when `stale_only`) and not being
  // asked already as asked, and returns them (as indices into `endpoints`).
  std::vector<size_t> TakeAsks(const std::vector<size_t>& endpoints, bool stale_only, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Record(const std::vector<size_t>& endpoints, const std::vector<std::optional<sandbox::v1::Info>>& infos,
              absl::Time at) ABSL_LOCKS_EXCLUDED(mu_);
  void Refresher();

  const Ask ask_;
  const Members members_;
  const Options options_;
  codemode::Mutex mu_;
  std::map<size_t, Seen> seen_ ABSL_GUARDED_BY(mu_);
  absl::Time used_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// What placement reads of an answer (ReadLoad's fields), bounded as LoadWatch keeps it: an
// endpoint's answer is kept between creates, so its images, notes and layers are not.
sandbox::v1::Info LoadOf(const sandbox::v1::Info& info);

// `info` with `placed` more sessions and as many fewer warm containers in each pool.
sandbox::v1::Info WithPlaced(sandbox::v1::Info info, uint32_t placed);

}  // namespace gateway
