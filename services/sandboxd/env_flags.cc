// The flags of what every sandbox's environment holds: --env and --pass_env.
#include "env_flags.h"

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/untrusted_json.h"

ABSL_FLAG(std::vector<std::string>, env, {},
          "KEY=VALUE pairs set in every container, comma-separated. Nothing else from the "
          "host environment reaches the sandbox.");
ABSL_FLAG(std::vector<std::string>, pass_env, {},
          "Names of host environment variables copied into every container, comma-separated.");

// --env and --pass_env: KEY=VALUE entries in valid UTF-8 (podman's API and GetInfo carry
// them as JSON and protobuf strings). No value is printed: it may be a secret.
absl::Status ContainerEnvFromFlags(std::vector<std::string>* env) {
  for (const std::string& kv : absl::GetFlag(FLAGS_env)) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || !codemode::IsValidUtf8(kv)) {
      // The key alone: a value may be a secret.
      return absl::InvalidArgumentError(absl::StrCat("--env entry '", codemode::LogQuoted(kv.substr(0, eq)),
                                                     "' is not KEY=VALUE in valid UTF-8"));
    }
    env->push_back(kv);
  }
  for (const std::string& name : absl::GetFlag(FLAGS_pass_env)) {
    const char* v = std::getenv(name.c_str());
    if (!v) continue;
    if (name.empty() || name.find('=') != std::string::npos || !codemode::IsValidUtf8(name) ||
        !codemode::IsValidUtf8(v)) {
      return absl::InvalidArgumentError(absl::StrCat("--pass_env variable '", codemode::LogQuoted(name),
                                                     "' is not a name with a value in valid UTF-8"));
    }
    env->push_back(name + "=" + v);
  }
  return absl::OkStatus();
}
