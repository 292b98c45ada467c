// The text of an approval question: what a person reads before a tool call of sandboxed
// code goes upstream (RunApprovals, bridge/run_approvals.h, asks it).
//
// The sandboxed code chooses the arguments and an upstream chooses its tool's name, so the
// question is written to be read, not parsed, and neither can hide, reorder or forge part
// of it:
//
//  - Every name (server, tool, argument key) and string value is shown as a JSON string,
//    escaped the one same way (ShowString): `"` and `\` escaped, and every character that
//    breaks a line, reorders text or is invisible (C0/C1 controls, separators, bidi marks,
//    overrides and isolates, right-to-left letters, zero-width and format characters,
//    non-ASCII spaces, variation selectors, tags, private use) shown as `\uXXXX`. What is
//    left prints as itself, left to right, on the line it is on.
//  - Only what the tool's inputSchema marks (`"format": "password"` or `"writeOnly": true`,
//    through `properties` and `items`) or the operator names in the server's
//    `approval.hide` (exact names of top-level arguments) is hidden, as `<N bytes hidden
//    by ...>`, and only a scalar: an object or array there is shown. Never by what a value
//    holds or by part of a key's name.
//  - What is too long to show whole is clipped to its head and tail around
//    `…<N bytes not shown>…`, outside the quotes where no string can write it; arguments
//    nested deeper than kMaxShownDepth and fields past the summary's byte budget are
//    marked the same way. When anything is not shown, the message starts by saying so and
//    how much, and the form's title says so too: the person decides knowing it.
//
//   ArgumentHiding hiding{&tool.input_schema, &policy.Hidden("github")};
//   json params = ApprovalQuestion("run_python", {{"github", "delete_repo", &arguments, hiding}}, 1024);
//   // params: {"message": ..., "requestedSchema": ...} of an elicitation/create (form mode)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gateway {

// Names (server, tool) are shown in at most this many bytes of escaped text, head and tail.
inline constexpr size_t kMaxShownName = 128;
// Argument keys, at most this many (or the string limit of the summary, when smaller).
inline constexpr size_t kMaxShownKey = 64;
// Arguments nested deeper than this are shown as not shown.
inline constexpr int kMaxShownDepth = 8;

// Whether ShowString shows code point `cp` (past ASCII) as `\uXXXX` wherever it stands.
bool IsShownAsEscape(uint32_t cp);

// A text as the person sees it, and how many bytes of what it shows are left out of it.
struct ShownText {
  std::string text;
  uint64_t not_shown = 0;
};

// `text` as a quoted JSON string, escaped as above, clipped to its head and tail when its
// escaped form is longer than `max` bytes: `"head"…<N bytes not shown>…"tail"`, N the bytes
// of `text` left out.
ShownText ShowString(absl::string_view text, size_t max);

// What of a tool's arguments is hidden from the person (null: nothing by that source).
struct ArgumentHiding {
  const nlohmann::json* input_schema = nullptr;      // the tool's inputSchema
  const std::vector<std::string>* names = nullptr;  // exact argument names (approval.hide)
};

// The arguments as the person sees them, in about `max_bytes` (the byte budget of the
// summary; past it, `…<N more bytes not shown>`). Strings are clipped shorter (200, then
// 64, then 24 bytes) until all fields fit, so that no field pushes the others out.
ShownText ShowArguments(const nlohmann::json& arguments, const ArgumentHiding& hiding, size_t max_bytes);

// One call the question asks about.
struct QuestionCall {
  std::string server, tool;
  const nlohmann::json* arguments;
  ArgumentHiding hiding;
};

// The params of the elicitation/create that asks about `calls` (at least one) made by code
// running in `run_tool` ("run_python", "run_javascript"): `message`, and `requestedSchema`
// with `decision` (once, run, sandbox) and, for several calls, a checkbox per call
// (`call_1` ...). Each call's arguments get `max_summary_bytes` (a quarter each when
// there are several).
nlohmann::json ApprovalQuestion(absl::string_view run_tool, const std::vector<QuestionCall>& calls,
                                size_t max_summary_bytes);

}  // namespace gateway
