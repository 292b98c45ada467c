#include "base/allocator.h"

#include <malloc.h>

namespace codemode {

void ReturnLargeBlocksToTheSystem() {
  // Blocks of 1 MiB or more are mmapped and unmapped on free. Setting the threshold also
  // stops glibc from raising it after large frees, which is what kept them in the heap.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Free heap memory above 1 MiB at the top of an arena goes back at once.
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  // A few arenas for many short-lived threads (tool calls, HTTP, gRPC): less memory held
  // in per-thread arenas, little contention at this scale.
  mallopt(M_ARENA_MAX, 4);
}

void ReturnFreeMemory() { malloc_trim(0); }

}  // namespace codemode
