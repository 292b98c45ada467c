// The flags of what every sandbox's environment holds (--env, --pass_env), read into the
// KEY=VALUE entries each container or wasm process gets.
//
//   if (absl::Status s = ContainerEnvFromFlags(&options.container_env); !s.ok()) return s;
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

// INVALID_ARGUMENT for an --env entry that is not KEY=VALUE in valid UTF-8, or a --pass_env
// variable whose name or value is not valid UTF-8 (the value is never printed).
absl::Status ContainerEnvFromFlags(std::vector<std::string>* env);
