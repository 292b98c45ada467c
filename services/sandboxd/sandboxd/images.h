// The container images sessions may run: the daemon's default (--image, named "default")
// and the ones an operator lets clients pick by name (--images=data=REF,...). A client
// asks by name only, so it can never make sandboxd start an arbitrary image.
//
//   absl::StatusOr<ImageSet> set = ImageSet::Parse("localhost/sandboxd-python:bookworm",
//                                                  {"data=localhost/sandboxd-python-data:bookworm"});
//   absl::StatusOr<ImageChoice> img = set->Resolve(request.image());   // "" -> default
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandboxd {

inline constexpr char kDefaultImageName[] = "default";
// The image label that says what an image offers ("python3,numpy,pandas,...").
inline constexpr char kImageOffersLabel[] = "io.sandboxd.offers";

struct ImageChoice {
  std::string name;
  std::string reference;
  bool operator==(const ImageChoice& o) const { return name == o.name && reference == o.reference; }
};

class ImageSet {
 public:
  // INVALID_ARGUMENT for a reference that is empty or not printable ASCII without spaces,
  // an entry that is not name=reference, a name outside [a-z0-9][a-z0-9._-]{0,62},
  // "default", or a name given twice; the message shows what was given escaped.
  static absl::StatusOr<ImageSet> Parse(const std::string& default_reference,
                                        const std::vector<std::string>& extra);

  // The image a request names; empty names the default. PERMISSION_DENIED otherwise.
  absl::StatusOr<ImageChoice> Resolve(absl::string_view name) const;

  const ImageChoice& default_image() const { return images_.front(); }
  // The default first, then the others in flag order.
  const std::vector<ImageChoice>& all() const { return images_; }

 private:
  explicit ImageSet(std::vector<ImageChoice> images) : images_(std::move(images)) {}
  std::vector<ImageChoice> images_;
};

// The offers of an image from its io.sandboxd.offers label value: comma-separated,
// trimmed, empty items dropped.
std::vector<std::string> ParseImageOffers(absl::string_view label);

}  // namespace sandboxd
