#include "base/untrusted_json.h"

#include "absl/strings/str_cat.h"

namespace codemode {

bool JsonDepthWithinLimit(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

namespace {

// nlohmann's own DOM builder with a depth check: sax_parse calls these by name, so the
// two shadowing members below are all it takes. Returning false aborts the parse at the
// first level too deep, before anything of it is built.
template <typename Json>
class DepthLimitedDom : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  DepthLimitedDom(Json& result, int max_depth)
      : Base(result, /*allow_exceptions_=*/false), max_depth_(max_depth) {}

  bool start_object(std::size_t n) { return Enter() && Base::start_object(n); }
  bool start_array(std::size_t n) { return Enter() && Base::start_array(n); }
  bool end_object() { return Leave() && Base::end_object(); }
  bool end_array() { return Leave() && Base::end_array(); }

  bool too_deep() const { return too_deep_; }

 private:
  bool Enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }
  bool Leave() {
    --depth_;
    return true;
  }

  const int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
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
  DepthLimitedDom<Json> dom(v, limits.max_depth);
  bool ok = Json::sax_parse(text.begin(), text.end(), &dom, Json::input_format_t::json,
                            /*strict=*/true, limits.allow_comments);
  if (dom.too_deep()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests deeper than ", limits.max_depth, " levels"));
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

}  // namespace codemode
