// What the gateway adds to a run's Finished message. See run_report.h.
#include "bridge/run_report.h"

#include "absl/strings/str_cat.h"

namespace gateway {

std::string Clip(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t head = max * 2 / 3, tail = max - head;
  return absl::StrCat(text.substr(0, head), "\n[... ", text.size() - head - tail,
                      " bytes omitted ...]\n", text.substr(text.size() - tail));
}

}  // namespace gateway
