#include "base/untrusted_json.h"

#include "absl/strings/str_cat.h"

namespace codemode {

namespace {

// nlohmann's own DOM builder with a depth and a value budget: sax_parse calls these by
// name, so shadowing them is all it takes. Returning false aborts the parse at the first
// value past the budget, before anything more is built.
template <typename Json>
class DepthLimitedDom : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  DepthLimitedDom(Json& result, const JsonLimits& limits)
      : Base(result, /*allow_exceptions_=*/false), limits_(limits) {}

  bool start_object(std::size_t n) { return Enter() && Base::start_object(n); }
  bool start_array(std::size_t n) { return Enter() && Base::start_array(n); }
  bool end_object() { return Leave() && Base::end_object(); }
  bool end_array() { return Leave() && Base::end_array(); }
  bool null() { return Count() && Base::null(); }
  bool boolean(bool v) { return Count() && Base::boolean(v); }
  bool number_integer(typename Json::number_integer_t v) {
    return Count() && Base::number_integer(v);
  }
  bool number_unsigned(typename Json::number_unsigned_t v) {
    return Count() && Base::number_unsigned(v);
  }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& s) {
    return Count() && Base::number_float(v, s);
  }
  bool string(typename Json::string_t& v) { return Count() && Base::string(v); }

  bool too_deep() const { return too_deep_; }
  bool too_many() const { return too_many_; }

 private:
  bool Count() {
    if (++values_ <= limits_.max_values) return true;
    too_many_ = true;
    return false;
  }
  bool Enter() {
    if (!Count()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    too_deep_ = true;
    return false;
  }
  bool Leave() {
    --depth_;
    return true;
  }

  const JsonLimits& limits_;
  int depth_ = 0;
  size_t values_ = 0;
  bool too_deep_ = false;
  bool too_many_ = false;
};

}  // namespace

template <typename Json>
absl::StatusOr<Json> ParseUntrustedJson(absl::string_view text, absl::string_view what,
                                        const JsonLimits& limits) {
  if (limits.max_bytes != 0 && text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", text.size(),
                                                   " bytes; the limit is ", limits.max_bytes));
  }
  Json v;
  DepthLimitedDom<Json> dom(v, limits);
  bool ok = Json::sax_parse(text.begin(), text.end(), &dom, Json::input_format_t::json,
                            /*strict=*/true, limits.allow_comments);
  if (dom.too_deep()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests deeper than ", limits.max_depth, " levels"));
  }
  if (dom.too_many()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " holds more than ", limits.max_values, " values"));
  }
  if (!ok || dom.is_errored()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  }
  return v;
}

template absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view, absl::string_view,
                                                           const JsonLimits&);
template absl::StatusOr<nlohmann::ordered_json> ParseUntrustedJson(absl::string_view,
                                                                   absl::string_view,
                                                                   const JsonLimits&);

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Sequence length and the smallest code point it may encode (shorter is overlong).
    size_t n;
    uint32_t cp, min;
    if ((c >> 5) == 0x6) {
      n = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c >> 4) == 0xe) {
      n = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c >> 3) == 0x1e) {
      n = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

std::optional<std::string> StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

namespace {
const nlohmann::json* Field(const nlohmann::json& object, const char* key,
                            nlohmann::json::value_t type) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() && it->type() == type ? &*it : nullptr;
}
}  // namespace

const nlohmann::json* ObjectField(const nlohmann::json& object, const char* key) {
  return Field(object, key, nlohmann::json::value_t::object);
}

const nlohmann::json* ArrayField(const nlohmann::json& object, const char* key) {
  return Field(object, key, nlohmann::json::value_t::array);
}

uint64_t ApproxJsonBytes(const nlohmann::json& value) {
  // A node's own size, about what nlohmann's basic_json takes.
  constexpr uint64_t kNode = 16;
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return kNode + value.get_ref<const std::string&>().size();
    case nlohmann::json::value_t::object: {
      uint64_t sum = kNode;
      for (auto it = value.begin(); it != value.end(); ++it) {
        sum += kNode + it.key().size() + ApproxJsonBytes(it.value());
      }
      return sum;
    }
    case nlohmann::json::value_t::array: {
      uint64_t sum = kNode;
      for (const auto& item : value) sum += ApproxJsonBytes(item);
      return sum;
    }
    case nlohmann::json::value_t::binary:
      return kNode + value.get_binary().size();
    default:
      return kNode;
  }
}

}  // namespace codemode
