// libFuzzer target: an mcpServers configuration file (Claude Desktop / .mcp.json / Cursor
// format), loaded through the same code as the gateway's --config files. The input is
// handed over as an in-memory file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "upstream/config.h"
#include "spdlog/spdlog.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("mcp.json", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  (void)gateway::LoadUpstreamConfig({"/proc/self/fd/" + std::to_string(fd)}, {}, "");
  close(fd);
  return 0;
}
