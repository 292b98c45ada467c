// What `sandboxd --help` says: the description and every flag by group (flag_groups.cc).
#pragma once

#include "base/command_line.h"

namespace sandboxd {

codemode::ProgramHelp SandboxdHelp();

}  // namespace sandboxd
