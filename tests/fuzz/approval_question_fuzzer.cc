// libFuzzer target: the approval question (approvals/approval_question.h) about a call
// whose server and tool names an upstream chose and whose arguments sandboxed code chose.
// The input: one control byte (bits 0-5: the summary's byte budget, bit 7: the question
// lists the call twice, as a batch), then the server name, the tool name, the arguments
// (JSON; other bytes are the value of one string argument, '?' for bytes past ASCII when
// they are not UTF-8) and the tool's inputSchema,
// separated by NUL bytes. Whatever they hold:
//  - the message is UTF-8 with no character that breaks a line, reorders or hides text,
//    and has exactly one line per call (and one more for the warning);
//  - the message says first that not everything is shown whenever anything is not;
//  - arguments shown whole (nothing hidden, nothing left out) read back as JSON to exactly
//    the arguments, and a name shown whole reads back to the name;
//  - the summary stays within its budget and the marker that says what it left out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "approvals/approval_question.h"
#include "base/utf8.h"

namespace {

using nlohmann::json;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// No control character but '\n', no character shown as an escape, valid UTF-8; returns
// the number of lines.
size_t CheckVisible(const std::string& text) {
  size_t lines = 1;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      Check(c >= 0x20 || c == '\n');
      Check(c != 0x7F);
      lines += c == '\n';
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = codemode::DecodeUtf8(text, i, &cp);
    Check(n > 0);
    Check(!gateway::IsShownAsEscape(cp));
    // And, apart from that list, the characters that break lines and reorder text.
    Check(cp != 0x85 && cp != 0x2028 && cp != 0x2029 && cp != 0x061C && cp != 0x200E && cp != 0x200F);
    Check(!(cp >= 0x202A && cp <= 0x202E) && !(cp >= 0x2066 && cp <= 0x2069));
    i += n;
  }
  return lines;
}

bool IsUtf8(const std::string& text) {
  uint32_t cp = 0;
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = codemode::DecodeUtf8(text, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// A name is shown on one line; shown whole, it reads back as JSON to itself (bytes that
// are not UTF-8 are shown as U+FFFD).
void CheckName(const std::string& name) {
  const gateway::ShownText shown = gateway::ShowString(name, gateway::kMaxShownName);
  Check(CheckVisible(shown.text) == 1);
  if (shown.not_shown > 0) return;
  const json back = json::parse(shown.text, nullptr, false);
  Check(back.is_string());
  if (IsUtf8(name)) Check(back.get<std::string>() == name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> parts = absl::StrSplit(rest, absl::MaxSplits('\0', 3));
  parts.resize(4);
  const std::string& server = parts[0];
  const std::string& tool = parts[1];
  json arguments = json::parse(parts[2], nullptr, false);
  // Arguments are parsed JSON, so their strings are UTF-8: other bytes become '?'.
  if (arguments.is_discarded()) {
    std::string value = parts[2];
    if (!IsUtf8(value)) {
      for (char& c : value) {
        if (static_cast<unsigned char>(c) >= 0x80) c = '?';
      }
    }
    arguments = {{"value", value}};
  }
  json schema = json::parse(parts[3], nullptr, false);
  if (schema.is_discarded()) schema = nullptr;
  const size_t budget = 64 + (control & 0x3F) * 32;

  CheckName(server);
  CheckName(tool);

  // Nothing hidden: what is shown whole is the arguments.
  const gateway::ShownText whole = gateway::ShowArguments(arguments, {}, budget);
  CheckVisible(whole.text);
  Check(whole.text.size() <= budget + 64);
  if (whole.not_shown == 0) {
    const json back = json::parse(whole.text, nullptr, false);
    Check(!back.is_discarded());
    Check(back == json::parse(arguments.dump()));  // what goes upstream
  }

  const std::vector<std::string> names = {"password", "token"};
  const gateway::ArgumentHiding hiding{&schema, &names};
  std::vector<gateway::QuestionCall> calls = {{server, tool, &arguments, hiding}};
  if (control & 0x80) calls.push_back(calls[0]);
  const json question = gateway::ApprovalQuestion("run_python", calls, budget);
  const std::string& message = question["message"].get_ref<const std::string&>();
  const size_t lines = CheckVisible(message);
  const bool warned = absl::StartsWith(message, "NOT EVERYTHING IS SHOWN: ");
  Check(lines == (calls.size() == 1 ? 1 : calls.size() + 1) + (warned ? 1 : 0));
  const gateway::ShownText shown = gateway::ShowArguments(arguments, hiding, calls.size() == 1 ? budget : budget / 4);
  Check(warned == (shown.not_shown > 0 || gateway::ShowString(server, gateway::kMaxShownName).not_shown > 0 ||
                   gateway::ShowString(tool, gateway::kMaxShownName).not_shown > 0));
  for (const auto& [key, property] : question["requestedSchema"]["properties"].items()) {
    CheckVisible(property["title"].get<std::string>());
  }
  return 0;
}
