// Per-session user ids, for the mode where process limits are rlimits.
//
// RLIMIT_NPROC counts the processes of a real user id across the whole machine. Where
// podman cannot set a pids cgroup (rootless on cgroup v1), it is the only process limit,
// and with every container running as uid 65534 all sessions shared one budget: threads
// started in four sessions left every other session unable to start one. Giving each
// container a user id of its own makes the rlimit a per-session limit. The ids come from
// the rootless user's subordinate range (container uid U is host uid base+U-1), which no
// other account uses.
//
//   auto pool = UidPool::Create(10000, 4096);
//   std::shared_ptr<UidPool::Lease> lease = pool->Acquire();   // nullptr: all in use
//   spec.uid = lease->uid();     // released when the last holder drops the lease
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "base/mutex.h"

namespace sandboxd {

class UidPool : public std::enable_shared_from_this<UidPool> {
 public:
  class Lease {
   public:
    Lease(std::shared_ptr<UidPool> pool, uint32_t uid) : pool_(std::move(pool)), uid_(uid) {}
    ~Lease() { pool_->Release(uid_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    uint32_t uid() const { return uid_; }

   private:
    std::shared_ptr<UidPool> pool_;
    uint32_t uid_;
  };

  static std::shared_ptr<UidPool> Create(uint32_t first, uint32_t count) {
    return std::shared_ptr<UidPool>(new UidPool(first, count));
  }

  // The lowest uid neither leased nor in `busy`, or nullptr when there is none.
  std::shared_ptr<Lease> Acquire(const std::set<uint32_t>& busy = {});
  // The same, passing over every uid `named` says yes to too. `named` runs without the
  // pool's lock (it may wait on NSS), and only for the uids Acquire would otherwise give.
  std::shared_ptr<Lease> Acquire(const std::set<uint32_t>& busy,
                                 const std::function<bool(uint32_t)>& named);
  // The lease of a uid a recovered container already runs as (the same lease when two
  // containers claim it; a uid outside the range gets a lease that reserves nothing).
  std::shared_ptr<Lease> Claim(uint32_t uid);

  uint32_t first() const { return first_; }
  uint32_t count() const { return count_; }

 private:
  UidPool(uint32_t first, uint32_t count) : first_(first), count_(count) {}
  void Release(uint32_t uid) ABSL_LOCKS_EXCLUDED(mu_);

  const uint32_t first_;
  const uint32_t count_;
  codemode::Mutex mu_;
  std::map<uint32_t, std::weak_ptr<Lease>> leased_ ABSL_GUARDED_BY(mu_);
};

// The ids in [first, first + count) that a thread on this host has as a user or group id:
// its real, effective, saved or filesystem uid or gid, or a supplementary group (the
// Uid:, Gid: and Groups: lines of <proc>/*/task/*/status). Every thread counts, since
// credentials are per thread (a root daemon may run one thread as another uid) and the
// kernel checks access to a process's memory and signals against the thread's. A wasm
// session runs as uid U and gid U, so an id in use either way is never given to a new
// session: not while a process of an earlier session outlives it, nor while another
// sandboxd on the host (which leases from the same range) or this one before a restart
// has a session running as it.
//
// A scan reads each process's status (its first thread's ids and its number of threads)
// and, of a process of more than one thread, the other threads' statuses. A scan of the
// same ThreadIds does not read again a thread it read before that cannot have taken an id
// since: a thread's ids change only through its own set*id calls, which give it an id it
// does not have only with CAP_SETUID or CAP_SETGID in its permitted set (CapPrm:), which
// grows only by an exec, after which the thread is its process's first (tid = pid), whose
// status every scan reads; a thread it starts starts with its ids. Such a thread
// is known by its task directory's inode (and owner), which the kernel ties to that one
// thread: a new thread with the same tid has a new one. So a user's many idle threads
// cost each later scan a stat per thread, not a read.
class ThreadIds {
 public:
  ThreadIds(uint32_t first, uint32_t count, std::string proc = "/proc")
      : first_(first), count_(count), proc_(std::move(proc)) {}
  std::set<uint32_t> InUse() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Known {
    uint64_t inode;
    uint32_t owner;
    uint32_t group;
    std::vector<uint32_t> ids;  // its ids in the range
  };
  using KnownThreads = std::map<long, Known>;  // by tid: threads that cannot take ids
  void ScanThreads(int process, long pid, const KnownThreads& before, KnownThreads* after,
                   std::set<uint32_t>* busy) const;

  const uint32_t first_;
  const uint32_t count_;
  const std::string proc_;
  codemode::Mutex mu_;
  KnownThreads known_ ABSL_GUARDED_BY(mu_);
};

// One scan of a fresh ThreadIds.
std::set<uint32_t> UidsWithProcesses(uint32_t first, uint32_t count,
                                     const std::string& proc = "/proc");

// Whether a host account (getpwuid_r) or group (getgrgid_r) has `id`. An NSS error other
// than "no such entry" counts as yes: an id that cannot be vouched for is not given out.
bool HostNamesId(uint32_t id);

// Whether a host account or group has an id, asking `lookup` (HostNamesId). A yes is kept
// for `refresh`: NSS may ask a directory server, which must not be asked about every named
// uid of the range on every session start. A no is never kept, so the id a session gets is
// looked up when it gets it (one lookup per start): an account created after an earlier
// lookup of the id is seen. One created after a session got its id is not noticed
// (docs/wasm-tier.md, "Users").
class NamedIds {
 public:
  using Lookup = std::function<bool(uint32_t id)>;
  NamedIds(Lookup lookup, absl::Duration refresh) : lookup_(std::move(lookup)), refresh_(refresh) {}
  bool Named(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Lookup lookup_;
  const absl::Duration refresh_;
  codemode::Mutex mu_;
  std::map<uint32_t, absl::Time> named_at_ ABSL_GUARDED_BY(mu_);  // when a yes was asked
};

}  // namespace sandboxd
