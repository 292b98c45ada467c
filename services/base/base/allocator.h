// Memory that untrusted messages borrow goes back to the system.
//
// Both services take messages of up to 16 MiB from clients, upstreams and sandboxes, and
// parse, copy and serialise them on many threads. With glibc's defaults each thread gets
// an arena of its own and the mmap threshold grows with the largest free it has seen, so
// such buffers come from the heap and stay in it after they are freed: the gateway kept
// ~200 MiB after a burst of twelve 4 MB tool calls. Serving every block of 1 MiB or more
// with mmap (freed = returned) and capping the arenas brought it back to ~40 MiB.
//
//   int main() { codemode::ReturnLargeBlocksToTheSystem(); ... }
#pragma once

namespace codemode {

// Call once, first thing in main, before other threads start.
void ReturnLargeBlocksToTheSystem();

// Gives the free pages inside the heap back to the system, not only those at its top (a
// parsed JSON document is many small blocks, so its freed memory is scattered: ~230 MiB
// stayed after a burst of large client messages). ShutdownSignal::Wait calls it every
// kReturnFreeMemorySeconds while the main thread waits.
void ReturnFreeMemory();
inline constexpr int kReturnFreeMemorySeconds = 10;

}  // namespace codemode
