// Python parameter names. See python_names.h.
#include "catalog/python_names.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "catalog/python_name_tables.h"

namespace codemode {
namespace {

using nlohmann::json;
using python_tables::CodePointRange;

bool InRanges(const CodePointRange* table, size_t size, uint32_t cp) {
  const CodePointRange* end = table + size;
  const CodePointRange* it = std::upper_bound(
      table, end, cp, [](uint32_t c, const CodePointRange& r) { return c < r.lo; });
  return it != table && cp <= (it - 1)->hi;
}

bool IsStart(uint32_t cp) {
  return InRanges(python_tables::kPythonIdentifierStart, python_tables::kPythonIdentifierStartSize,
                  cp);
}
bool IsContinue(uint32_t cp) {
  return InRanges(python_tables::kPythonIdentifierContinue,
                  python_tables::kPythonIdentifierContinueSize, cp);
}
bool IsWord(uint32_t cp) {
  return InRanges(python_tables::kPythonWord, python_tables::kPythonWordSize, cp);
}
bool IsDigit(uint32_t cp) {
  return InRanges(python_tables::kPythonDigit, python_tables::kPythonDigitSize, cp);
}
bool IsNfkcUnstable(uint32_t cp) {
  return InRanges(python_tables::kNfkcUnstable, python_tables::kNfkcUnstableSize, cp);
}

// The code points of `text`; false when it is not UTF-8.
bool CodePoints(absl::string_view text, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = static_cast<unsigned char>(text[i]);
    size_t n = 1;
    if (cp >= 0x80 && (n = DecodeUtf8(text, i, &cp)) == 0) return false;
    out->push_back(cp);
    i += n;
  }
  return true;
}

// An identifier, not a keyword, and spelt as Python reads it in source (NFKC).
bool IsFreeName(const std::string& name) {
  std::vector<uint32_t> cps;
  return IsPythonIdentifier(name) && !IsPythonKeyword(name) && CodePoints(name, &cps) &&
         std::none_of(cps.begin(), cps.end(), IsNfkcUnstable);
}

// re.sub(r"\W", "_", name) or "_"; a leading digit gets a '_' prefix, a keyword a '_'
// suffix. Empty when the result is no free name or `taken` has it.
std::string SanitisedParameter(const std::string& name,
                               const absl::flat_hash_set<std::string>& taken) {
  std::string candidate;
  bool leading_digit = false;
  for (size_t i = 0; i < name.size();) {
    uint32_t cp = static_cast<unsigned char>(name[i]);
    size_t n = 1;
    if (cp >= 0x80 && (n = DecodeUtf8(name, i, &cp)) == 0) return "";
    const bool word = IsWord(cp);
    if (i == 0) leading_digit = word && IsDigit(cp);
    candidate.append(word ? name.substr(i, n) : std::string("_"));
    i += n;
  }
  if (candidate.empty()) candidate = "_";
  if (leading_digit) candidate.insert(0, "_");
  if (IsPythonKeyword(candidate)) candidate.push_back('_');
  if (!IsFreeName(candidate) || taken.contains(candidate)) return "";
  return candidate;
}

// The property names in the runner's signature order (python_names.h).
std::vector<std::string> OrderedNames(const json& schema) {
  static const json kEmpty = json::object();
  const json* properties = &kEmpty;
  std::vector<std::string> required;
  if (schema.is_object()) {
    if (auto p = schema.find("properties"); p != schema.end() && p->is_object()) properties = &*p;
    if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
      for (const json& n : *r) {
        if (n.is_string()) required.push_back(n.get<std::string>());
      }
    }
  }
  const std::set<std::string> required_set(required.begin(), required.end());
  std::vector<std::string> names;
  for (const auto& [name, unused] : properties->items()) {
    if (required_set.count(name)) names.push_back(name);
  }
  std::set<std::string> seen;
  for (const std::string& name : required) {
    if (!properties->contains(name) && seen.insert(name).second) names.push_back(name);
  }
  for (const auto& [name, unused] : properties->items()) {
    if (!required_set.count(name)) names.push_back(name);
  }
  return names;
}

}  // namespace

bool IsPythonKeyword(absl::string_view name) {
  static const auto* kw = new std::set<absl::string_view>{
      "False", "None",   "True",    "and",      "as",       "assert", "async",
      "await", "break",  "class",   "continue", "def",      "del",    "elif",
      "else",  "except", "finally", "for",      "from",     "global", "if",
      "import", "in",    "is",      "lambda",   "nonlocal", "not",    "or",
      "pass",  "raise",  "return",  "try",      "while",    "with",   "yield"};
  return kw->count(name) > 0;
}

bool IsPythonIdentifier(absl::string_view name) {
  std::vector<uint32_t> cps;
  if (name.empty() || !CodePoints(name, &cps) || !IsStart(cps[0])) return false;
  return std::all_of(cps.begin() + 1, cps.end(), IsContinue);
}

PythonParameters PythonParameterNames(const json& input_schema) {
  PythonParameters out;
  absl::flat_hash_set<std::string> taken;
  for (std::string& name : OrderedNames(input_schema)) {
    CatalogParam param{std::move(name), ""};
    if (IsFreeName(param.name)) {
      param.py_name = param.name;
      taken.insert(param.name);
    }
    out.params.push_back(std::move(param));
  }
  bool unnamed = false;
  for (CatalogParam& param : out.params) {
    if (!param.py_name.empty()) continue;
    param.py_name = SanitisedParameter(param.name, taken);
    if (param.py_name.empty()) {
      unnamed = true;
    } else {
      taken.insert(param.py_name);
    }
  }
  if (!unnamed) return out;
  for (const char* name : {"kwargs", "extra", "_kwargs", "__kwargs"}) {
    if (!taken.contains(name)) {
      out.kwargs = name;
      return out;
    }
  }
  for (int n = 2; out.kwargs.empty(); ++n) {
    if (!taken.contains(absl::StrCat("kwargs_", n))) out.kwargs = absl::StrCat("kwargs_", n);
  }
  return out;
}

}  // namespace codemode
