#include "sandboxd/images.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"

namespace sandboxd {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool ok = std::islower(c) || std::isdigit(c) || (i > 0 && (c == '.' || c == '_' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

// An image reference is printable ASCII without spaces (a name, a tag, a digest): anything
// else is no image podman could pull, and would not survive JSON (GetInfo, podman's API).
bool ValidReference(absl::string_view ref) {
  if (ref.empty() || ref.size() > 512 || ref.front() == '-') return false;
  for (char c : ref) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ImageSet> ImageSet::Parse(const std::string& default_reference,
                                         const std::vector<std::string>& extra) {
  if (!ValidReference(default_reference)) {
    return absl::InvalidArgumentError(absl::StrCat("--image '", codemode::LogQuoted(default_reference),
                                                   "' is not an image reference"));
  }
  std::vector<ImageChoice> images = {{kDefaultImageName, default_reference}};
  for (const std::string& entry : extra) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (!ValidName(kv.first) || kv.first == kDefaultImageName || !ValidReference(kv.second)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--images entry '", codemode::LogQuoted(entry), "' is not NAME=REFERENCE (NAME of [a-z0-9._-], not \"default\"; REFERENCE "
          "printable ASCII without spaces)"));
    }
    for (const ImageChoice& seen : images) {
      if (seen.name == kv.first) {
        return absl::InvalidArgumentError(absl::StrCat("--images names '", kv.first, "' twice"));
      }
    }
    images.push_back({kv.first, kv.second});
  }
  return ImageSet(std::move(images));
}

absl::StatusOr<ImageChoice> ImageSet::Resolve(absl::string_view name) const {
  if (name.empty()) return images_.front();
  for (const ImageChoice& image : images_) {
    if (image.name == name) return image;
  }
  std::vector<std::string> names;
  for (const ImageChoice& image : images_) names.push_back(image.name);
  return absl::PermissionDeniedError(absl::StrCat(
      "image '", name.substr(0, 64), "' is not offered by this daemon (its images: ",
      absl::StrJoin(names, ", "), "; an operator adds one with --images=NAME=REFERENCE)"));
}

std::vector<std::string> ParseImageOffers(absl::string_view label) {
  std::vector<std::string> offers;
  for (absl::string_view item : absl::StrSplit(label, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) offers.emplace_back(item);
  }
  return offers;
}

}  // namespace sandboxd
