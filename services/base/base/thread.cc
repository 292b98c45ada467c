#include "base/thread.h"

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
    RunContained(name.c_str(), fn);
  });
}

}  // namespace codemode
