// The product's version, one for both programs: the `project(... VERSION)` of the top
// CMakeLists.txt. sandboxd's GetInfo, the gateway's MCP serverInfo and clientInfo, the
// codemode_build_info metric and both programs' --version all say this string.
#pragma once

namespace codemode {

// "0.1.0".
extern const char kVersion[];
// `git rev-parse --short HEAD` of the source tree when the build was configured;
// "unknown" without git or outside a checkout.
extern const char kGitRevision[];
// CMAKE_BUILD_TYPE ("RelWithDebInfo", "Debug", ...); "unknown" when none was set.
extern const char kBuildType[];

}  // namespace codemode
