// Helpers of the SessionManager tests of room (session_reclaim_test.cc and
// session_gave_up_test.cc): requests by owner, and the Python pool's mark before a burst.
#ifndef SANDBOXD_TESTS_UNIT_ROOM_HELPERS_H_
#define SANDBOXD_TESTS_UNIT_ROOM_HELPERS_H_

#include "session_manager_fixture.h"

namespace sandboxd::testing {

inline sandbox::v1::CreateSessionRequest OwnedBy(const std::string& owner, bool reclaim_idle) {
  sandbox::v1::CreateSessionRequest r;
  r.set_owner(owner);
  r.set_reclaim_idle(reclaim_idle);
  return r;
}

inline ManagerOptions PerOwner(ManagerOptions o, uint32_t max_sessions_per_owner) {
  o.max_sessions_per_owner = max_sessions_per_owner;
  return o;
}

// The Python pool once it is full, before a burst.
struct PoolMark {
  uint64_t taken = 0;
  uint32_t target = 0;
  int starts = 0;
};
inline PoolMark MarkFullPool(SessionManager* m, ProcessRuntime* runtime) {
  EXPECT_TRUE(WaitFor([&] {
    const sandbox::v1::PoolInfo python = m->GetInfo().pools(0);
    return python.ready() == python.target();
  }));
  const sandbox::v1::PoolInfo python = m->GetInfo().pools(0);
  return {python.taken_total(), python.target(), runtime->start_calls()};
}

}  // namespace sandboxd::testing

#endif  // SANDBOXD_TESTS_UNIT_ROOM_HELPERS_H_
