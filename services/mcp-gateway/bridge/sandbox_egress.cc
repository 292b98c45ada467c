// The egress policy of the gateway's sandboxes. See sandbox_egress.h.
#include "bridge/sandbox_egress.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"
#include "nlohmann/json.hpp"

namespace gateway {
namespace {

// sandboxd's bound on a policy's text (docs/egress.md).
constexpr size_t kMaxPolicyBytes = 64 << 10;

// Who is given a policy with entries: "--sandbox_egress" and/or the credentials named.
std::vector<std::string> WithEgress(const SandboxEgress& egress) {
  std::vector<std::string> who;
  if (!PolicyEntries(egress.all).empty()) who.push_back("--sandbox_egress");
  for (const auto& [credential, policy] : egress.by_credential) {
    if (!PolicyEntries(policy).empty()) who.push_back(absl::StrCat("credential '", credential, "'"));
  }
  return who;
}

// Parses `text` as nlohmann::json::parse does, but refuses a key repeated in one object (the
// parser keeps the last, so a repeated credential would silently lose its first settings):
// the error names the key and the keys of the objects around it.
absl::StatusOr<nlohmann::json> ParseWithoutRepeatedKeys(const std::string& text) {
  struct Object {
    std::string key;  // the key this object is the value of ("" at the top or in an array)
    std::set<std::string> keys;
  };
  std::vector<Object> open;
  std::string last_key;
  std::string repeated;  // the first repeat found, said
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open.push_back({last_key, {}});
    } else if (event == Event::object_end || event == Event::array_start || event == Event::array_end) {
      if (event == Event::object_end && !open.empty()) open.pop_back();
      last_key.clear();
    } else if (event == Event::key && !open.empty()) {
      last_key = parsed.get<std::string>();
      if (open.back().keys.insert(last_key).second || !repeated.empty()) return true;
      std::vector<std::string> path;
      for (size_t i = 1; i < open.size(); ++i) {
        path.push_back(absl::StrCat("'", codemode::LogText(open[i].key.substr(0, 64)), "'"));
      }
      repeated = absl::StrCat("'", codemode::LogText(last_key.substr(0, 64)), "' appears twice in ",
                              path.empty() ? "the file's object" : absl::StrJoin(path, " > "));
    }
    return true;
  };
  nlohmann::json doc = nlohmann::json::parse(text, callback, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not a JSON object");
  if (!repeated.empty()) return absl::InvalidArgumentError(repeated);
  return doc;
}

}  // namespace

std::vector<std::string> UnservedCredentials(const SandboxEgress& egress, const std::vector<std::string>& known) {
  std::vector<std::string> lines;
  for (const auto& [credential, policy] : egress.by_credential) {
    if (std::find(known.begin(), known.end(), credential) != known.end()) continue;
    lines.push_back(absl::StrCat("--credential_settings: no client of this gateway is credential '",
                                 codemode::LogText(credential), "' (it serves ", absl::StrJoin(known, ", "),
                                 "): its settings apply to no one"));
  }
  return lines;
}

EgressCheck CheckEgress(const SandboxEgress& egress,
                        const std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>>& infos) {
  EgressCheck check;
  const std::vector<std::string> who = WithEgress(egress);
  const std::string whose = absl::StrJoin(who, ", ");
  std::optional<std::string> common;
  bool differ = false;
  for (const auto& [endpoint, info] : infos) {
    if (!info) continue;
    if (!who.empty() && info->egress_max().empty()) {
      check.problems.push_back(absl::StrCat(
          "sandboxd ", endpoint, " gives sandboxes no egress (its --egress_max is empty): sandboxes of ",
          whose, " fail to start there"));
    }
    if (common && *common != info->egress_default()) differ = true;
    common = info->egress_default();
  }
  if (differ) {
    check.problems.push_back(
        "the sandboxd endpoints differ in --egress_default: a sandbox sent no policy gets the "
        "one of where it is placed, and the tools' descriptions name none");
  } else if (common) {
    check.sandboxd_default = *common;
  }
  return check;
}

const std::string& SandboxEgress::Sent(const std::string& credential) const {
  auto it = by_credential.find(credential);
  return it != by_credential.end() ? it->second : all;
}

const std::string& SandboxEgress::Shown(const std::string& credential) const {
  const std::string& sent = Sent(credential);
  return sent.empty() ? sandboxd_default : sent;
}

std::vector<std::string> PolicyEntries(const std::string& policy) {
  std::vector<std::string> entries;
  for (absl::string_view line : absl::StrSplit(policy, '\n')) {
    line = line.substr(0, line.find('#'));
    for (absl::string_view entry : absl::StrSplit(line, absl::ByAnyChar(", \t\r"), absl::SkipEmpty())) {
      entries.emplace_back(entry);
    }
  }
  return entries;
}

absl::Status CheckPolicyText(const std::string& policy, const std::string& what) {
  if (policy.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": an egress policy is at most 64 KiB"));
  }
  for (unsigned char c : policy) {
    if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' || c == '\r') continue;
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": an egress policy is printable ASCII (write names in punycode): ",
        codemode::LogText(policy.substr(0, 200))));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseCredentialSettings(const std::string& text) {
  absl::StatusOr<nlohmann::json> parsed = ParseWithoutRepeatedKeys(text);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return absl::InvalidArgumentError("not a JSON object");
  std::map<std::string, std::string> egress;
  for (const auto& [key, value] : doc.items()) {
    if (key != "credentials" || !value.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", codemode::LogText(key.substr(0, 64)), "': the file holds one object, \"credentials\""));
    }
  }
  auto credentials = doc.find("credentials");
  if (credentials == doc.end()) return egress;
  for (const auto& [credential, settings] : credentials->items()) {
    const std::string where = absl::StrCat("credential '", codemode::LogText(credential.substr(0, 64)), "'");
    if (!settings.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    for (const auto& [key, value] : settings.items()) {
      if (key != "sandbox_egress" || !value.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", codemode::LogText(key.substr(0, 64)),
            "' is not a setting (the settings: \"sandbox_egress\", a string)"));
      }
      const std::string policy = value.get<std::string>();
      if (absl::Status s = CheckPolicyText(policy, where); !s.ok()) return s;
      egress[credential] = policy;
    }
  }
  return egress;
}

}  // namespace gateway
