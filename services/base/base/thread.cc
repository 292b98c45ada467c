#include "base/thread.h"

#include <pthread.h>

#include <exception>

#include "base/log_text.h"
#include "spdlog/spdlog.h"

namespace codemode {

bool RunContained(const char* what, const std::function<void()>& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("{}: unexpected exception contained: {}", what, codemode::LogLongText(e.what()));
  } catch (...) {
    spdlog::error("{}: unexpected non-standard exception contained", what);
  }
  return false;
}

std::thread StartThread(std::string name, std::function<void()> fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)] {
    // What `top -H`, /proc/<pid>/task/*/comm and debuggers show: the kernel keeps 15 bytes.
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    RunContained(name.c_str(), fn);
  });
}

}  // namespace codemode
