// spdlog for sandboxd, plus a formatter so absl::string_view (Debian's Abseil does not
// alias std::string_view) can be logged directly: spdlog::info("{}", status.message()).
#pragma once

#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
