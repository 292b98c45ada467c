// The text of an approval question. See approval_question.h.
#include "approvals/approval_question.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace gateway {

using nlohmann::json;

namespace {

// Marks that combine with the character before them: first in a string, with its quote.
bool IsCombiningMark(uint32_t cp) {
  return (cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x1AB0 && cp <= 0x1AFF) || (cp >= 0x1DC0 && cp <= 0x1DFF) ||
         (cp >= 0x20D0 && cp <= 0x20FF) || (cp >= 0xFE20 && cp <= 0xFE2F);
}

}  // namespace

// Code points (past ASCII) that do not print as one visible, left-to-right character on
// the line they are on: they end a line, reorder the text around them (right-to-left
// letters move the quotes and commas between them too), are invisible or look like
// another character (spaces), or print as whatever a font makes of them (private use).
bool IsShownAsEscape(uint32_t cp) {
  static constexpr std::pair<uint32_t, uint32_t> kRanges[] = {
      {0x007F, 0x00A0},    // DEL, C1 controls (U+0085 NEXT LINE), no-break space
      {0x00AD, 0x00AD},    // soft hyphen
      {0x034F, 0x034F},    // combining grapheme joiner
      {0x0590, 0x08FF},    // Hebrew, Arabic, Syriac, Thaana, NKo, ...: right to left
      {0x115F, 0x1160},    // Hangul fillers
      {0x1680, 0x1680},    // Ogham space
      {0x17B4, 0x17B5},    // Khmer invisible vowels
      {0x180B, 0x180F},    // Mongolian variation selectors, vowel separator
      {0x2000, 0x200F},    // spaces, zero-width characters, LRM, RLM
      {0x2028, 0x202F},    // line and paragraph separators, embeddings, overrides, narrow space
      {0x205F, 0x206F},    // math space, invisible operators, isolates, deprecated formats
      {0x2800, 0x2800},    // braille blank
      {0x3000, 0x3000},    // ideographic space
      {0x3164, 0x3164},    // Hangul filler
      {0xD800, 0xF8FF},    // surrogates, private use
      {0xFB1D, 0xFDFF},    // Hebrew and Arabic presentation forms, noncharacters
      {0xFE00, 0xFE0F},    // variation selectors
      {0xFE70, 0xFEFF},    // Arabic presentation forms, byte order mark
      {0xFFA0, 0xFFA0},    // halfwidth Hangul filler
      {0xFFF0, 0xFFFC},    // interlinear annotations, object replacement
      {0xFFFE, 0xFFFF},    // noncharacters
      {0x10800, 0x10FFF},  // right-to-left scripts
      {0x110BD, 0x110BD},  // Kaithi number sign
      {0x110CD, 0x110CD},
      {0x13430, 0x1343F},  // Egyptian hieroglyph format controls
      {0x1BCA0, 0x1BCA3},  // shorthand format controls
      {0x1D173, 0x1D17A},  // musical format controls
      {0x1E800, 0x1EFFF},  // right-to-left scripts
      {0xE0000, 0xE0FFF},  // tags, variation selectors supplement
      {0xF0000, 0x10FFFF}, // private use planes
  };
  for (const auto& [from, to] : kRanges) {
    if (cp >= from && cp <= to) return true;
  }
  return false;
}

namespace {

// JSON's escape of `cp`: \uXXXX, a surrogate pair past U+FFFF.
void AppendEscape(uint32_t cp, std::string* out) {
  if (cp > 0xFFFF) {
    cp -= 0x10000;
    absl::StrAppend(out, "\\u", absl::Hex(0xD800 + (cp >> 10), absl::kZeroPad4), "\\u",
                    absl::Hex(0xDC00 + (cp & 0x3FF), absl::kZeroPad4));
    return;
  }
  absl::StrAppend(out, "\\u", absl::Hex(cp, absl::kZeroPad4));
}

// Appends the shown form of the character at text[i] (`first`: the first of a quoted
// string) and returns its length in `text`. A byte that is not UTF-8 is U+FFFD's escape.
size_t AppendShown(absl::string_view text, size_t i, bool first, std::string* out) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7F) {
          AppendEscape(c, out);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    return 1;
  }
  uint32_t cp = 0;
  const size_t n = codemode::DecodeUtf8(text, i, &cp);
  if (n == 0) {
    AppendEscape(0xFFFD, out);
    return 1;
  }
  if (IsShownAsEscape(cp) || (first && IsCombiningMark(cp))) {
    AppendEscape(cp, out);
  } else {
    out->append(text.data() + i, n);
  }
  return n;
}

// The quoted, escaped form of text[from, to).
std::string Quoted(absl::string_view text, size_t from, size_t to) {
  std::string out = "\"";
  for (size_t i = from; i < to;) i += AppendShown(text, i, i == from, &out);
  out.push_back('"');
  return out;
}

}  // namespace

ShownText ShowString(absl::string_view text, size_t max) {
  std::string piece;
  auto shown_size = [&](size_t i, bool first, size_t* n) {
    piece.clear();
    *n = AppendShown(text, i, first, &piece);
    return piece.size();
  };
  size_t total = 0;
  for (size_t i = 0, n = 0; i < text.size(); i += n) total += shown_size(i, i == 0, &n);
  if (total <= max) return {Quoted(text, 0, text.size()), 0};
  // The head: whole characters in max/2 bytes of shown text.
  size_t head_end = 0, head_size = 0;
  for (size_t n = 0; head_end < text.size(); head_end += n) {
    const size_t size = shown_size(head_end, head_end == 0, &n);
    if (head_size + size > max / 2) break;
    head_size += size;
  }
  // The tail: the shortest run of whole characters at the end, after the head, whose shown
  // text fits max/2 bytes.
  size_t tail_start = head_end, before_tail = head_size;
  for (size_t n = 0; tail_start < text.size() && total - before_tail > max / 2; tail_start += n) {
    before_tail += shown_size(tail_start, tail_start == 0, &n);
  }
  const uint64_t left_out = tail_start - head_end;
  return {absl::StrCat(Quoted(text, 0, head_end), "\u2026<", left_out, " bytes not shown>\u2026",
                       Quoted(text, tail_start, text.size())),
          left_out};
}

namespace {

// The schema of property `key` of an object that `schema` describes (null: none).
const json* PropertyOf(const json* schema, const std::string& key) {
  if (schema == nullptr || !schema->is_object()) return nullptr;
  auto properties = schema->find("properties");
  if (properties == schema->end() || !properties->is_object()) return nullptr;
  auto property = properties->find(key);
  return property == properties->end() ? nullptr : &*property;
}

// The schema of the items of an array that `schema` describes (null: none).
const json* ItemsOf(const json* schema) {
  if (schema == nullptr || !schema->is_object()) return nullptr;
  auto items = schema->find("items");
  return items == schema->end() || !items->is_object() ? nullptr : &*items;
}

// Whether the schema says the value is a secret: `"format": "password"`, `"writeOnly": true`.
bool SchemaHides(const json* schema) {
  if (schema == nullptr || !schema->is_object()) return false;
  auto format = schema->find("format");
  auto write_only = schema->find("writeOnly");
  return (format != schema->end() && *format == "password") ||
         (write_only != schema->end() && *write_only == true);
}

// Writes the arguments as shown, within a byte budget: past it, every later piece is left
// out (and counted), so that what is shown is always a prefix in order.
class ArgumentsWriter {
 public:
  ArgumentsWriter(const ArgumentHiding& hiding, size_t max_string, size_t budget)
      : hiding_(hiding), max_string_(max_string), budget_(budget) {}

  void Value(const json& value, const json* schema, int depth) {
    if (depth > kMaxShownDepth) {
      const size_t size = value.dump(-1, ' ', false, json::error_handler_t::replace).size();
      Put(absl::StrCat("\u2026<", size, " bytes nested too deep, not shown>\u2026"), size);
      return;
    }
    if (value.is_object()) {
      Put("{");
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) Put(",");
        first = false;
        Put(ShowString(key, std::min(kMaxShownKey, max_string_)));
        Put(":");
        const json* property = PropertyOf(schema, key);
        // Only a secret's own value is hidden: a scalar, at a place the schema or the
        // operator named (approval.hide: the top level's names). The code chooses nesting
        // and shapes, so an object or array there is shown, and so is a name deeper down.
        const bool configured = depth == 0 && hiding_.names != nullptr &&
                                std::find(hiding_.names->begin(), hiding_.names->end(), key) != hiding_.names->end();
        const bool secret = item.is_primitive() && (SchemaHides(property) || configured);
        if (secret) {
          const size_t size = item.dump(-1, ' ', false, json::error_handler_t::replace).size();
          Put(absl::StrCat("<", size, " bytes hidden by ",
                           SchemaHides(property) ? "the tool's schema" : "the gateway's configuration", ">"));
        } else {
          Value(item, property, depth + 1);
        }
      }
      Put("}");
    } else if (value.is_array()) {
      Put("[");
      const json* items = ItemsOf(schema);
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) Put(",");
        Value(value[i], items, depth + 1);
      }
      Put("]");
    } else if (value.is_string()) {
      Put(ShowString(value.get_ref<const std::string&>(), max_string_));
    } else {
      Put(value.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }

  bool over_budget() const { return over_budget_ > 0; }

  ShownText Finish() {
    ShownText shown{std::move(out_), not_shown_ + over_budget_};
    if (over_budget_ > 0) absl::StrAppend(&shown.text, "\u2026<", over_budget_, " more bytes not shown>");
    return shown;
  }

 private:
  // `piece` stands for `left_out` more bytes than it shows.
  void Put(absl::string_view piece, uint64_t left_out = 0) {
    if (over_budget_ == 0 && out_.size() + piece.size() <= budget_) {
      out_.append(piece.data(), piece.size());
      not_shown_ += left_out;
      return;
    }
    over_budget_ += piece.size() + left_out;
  }
  void Put(const ShownText& shown) { Put(shown.text, shown.not_shown); }

  const ArgumentHiding& hiding_;
  const size_t max_string_;
  const size_t budget_;
  std::string out_;
  uint64_t not_shown_ = 0;
  uint64_t over_budget_ = 0;
};

}  // namespace

ShownText ShowArguments(const json& arguments, const ArgumentHiding& hiding, size_t max_bytes) {
  ShownText shown;
  for (size_t max_string : {size_t{200}, size_t{64}, size_t{24}}) {
    ArgumentsWriter writer(hiding, max_string, max_bytes);
    writer.Value(arguments, hiding.input_schema, 0);
    const bool fits = !writer.over_budget();
    shown = writer.Finish();
    if (fits) break;
  }
  return shown;
}

json ApprovalQuestion(absl::string_view run_tool, const std::vector<QuestionCall>& calls,
                      size_t max_summary_bytes) {
  const bool one = calls.size() == 1;
  uint64_t not_shown = 0;
  std::vector<std::string> names, arguments;  // per call
  for (const QuestionCall& call : calls) {
    const ShownText tool = ShowString(call.tool, kMaxShownName);
    const ShownText server = ShowString(call.server, kMaxShownName);
    ShownText shown = ShowArguments(*call.arguments, call.hiding, one ? max_summary_bytes : max_summary_bytes / 4);
    not_shown += tool.not_shown + server.not_shown + shown.not_shown;
    names.push_back(absl::StrCat("tool ", tool.text, " of server ", server.text));
    arguments.push_back(std::move(shown.text));
  }
  // First, where nothing the code or an upstream wrote can push it out of sight.
  std::string message;
  if (not_shown > 0) {
    message = absl::StrCat("NOT EVERYTHING IS SHOWN: ", not_shown, " bytes of ", one ? "this call are" : "these calls are",
                           " left out where \u2026<\u2026 not shown>\u2026 stands. Allow only if what is shown is "
                           "enough to decide.\n");
  }
  if (one) {
    absl::StrAppend(&message, "Code running in ", run_tool, " wants to call ", names[0], " with ", arguments[0],
                    ". Allow it?");
  } else {
    absl::StrAppend(&message, "Code running in ", run_tool, " wants to make ", calls.size(),
                    " calls that need approval (uncheck those to refuse):");
    for (size_t i = 0; i < calls.size(); ++i) {
      absl::StrAppend(&message, "\n", i + 1, ". ", names[i], " with ", arguments[i]);
    }
  }
  const std::string what = one ? names[0] : "these tools";
  const char* partly = not_shown > 0 ? " (not everything is shown)" : "";
  json properties = {{"decision",
                      {{"type", "string"},
                       {"title", absl::StrCat(one ? "Allow this call" : "Allow the checked calls", partly, "?")},
                       {"enum", {"once", "run", "sandbox"}},
                       {"enumNames", {one ? "Allow this call" : "Allow the checked calls",
                                      absl::StrCat("Allow ", what, " for the rest of this run"),
                                      absl::StrCat("Allow ", what, " in this sandbox")}}}}};
  json required = {"decision"};
  if (!one) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string key = absl::StrCat("call_", i + 1);
      properties[key] = {{"type", "boolean"}, {"title", absl::StrCat(i + 1, ". ", names[i])}, {"default", true}};
      required.push_back(key);
    }
  }
  return {{"message", std::move(message)},
          {"requestedSchema", {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}}}};
}

}  // namespace gateway
