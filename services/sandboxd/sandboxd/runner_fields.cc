#include "sandboxd/runner_fields.h"

#include "absl/strings/str_cat.h"

namespace sandboxd {

using nlohmann::json;

absl::Status RunnerViolation(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("runner protocol violation: ", what));
}

absl::StatusOr<uint64_t> RunnerUint(const json& obj, const char* key, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (!required) return uint64_t{0};
    return RunnerViolation(absl::StrCat("missing field '", key, "'"));
  }
  if (!it->is_number_unsigned()) {
    // Non-negative integers parse as unsigned; anything else is rejected.
    return RunnerViolation(absl::StrCat("field '", key, "' is not a non-negative integer"));
  }
  return it->get<uint64_t>();
}

absl::StatusOr<std::string> RunnerString(const json& obj, const char* key, size_t max_bytes,
                                         bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (!required) return std::string();
    return RunnerViolation(absl::StrCat("missing field '", key, "'"));
  }
  if (!it->is_string()) return RunnerViolation(absl::StrCat("field '", key, "' is not a string"));
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max_bytes) return RunnerViolation(absl::StrCat("field '", key, "' is too long"));
  return s;
}

}  // namespace sandboxd
