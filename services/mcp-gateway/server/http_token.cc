#include "server/http_token.h"

#include <openssl/sha.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"

namespace gateway {

std::string DefaultTokenFile() { return codemode::DefaultStateFile("mcp-gateway", "token"); }

absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path) {
  return codemode::LoadOrCreateSecretFile(path, {"token file", "token", "--token_file"});
}

std::string CredentialOfToken(const std::string& token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return absl::StrCat("token ", absl::BytesToHexString(absl::string_view(
                                    reinterpret_cast<const char*>(digest), 6)));
}

bool HideTokenArguments(int argc, char** argv) {
  bool found = false;
  auto blank = [&](char* value) {
    for (char* c = value; *c != '\0'; ++c) *c = 'x';
    found = true;
  };
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;  // absl stops parsing flags here
    if (arg == "--token" || arg == "-token") {
      if (i + 1 < argc) blank(argv[++i]);
    } else if (absl::StartsWith(arg, "--token=")) {
      blank(argv[i] + strlen("--token="));
    } else if (absl::StartsWith(arg, "-token=")) {
      blank(argv[i] + strlen("-token="));
    }
  }
  return found;
}

}  // namespace gateway
