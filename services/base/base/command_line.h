// A program's command line the way people expect it, on top of Abseil's flags:
//   --help, -h        the program's own flags (not Abseil's), by group, each with its
//                     default and one line of meaning, on stdout, exit 0
//   --help=WORD       only the flags whose name or text holds WORD, with their whole text
//   --version         the product version, the git revision and the build type, exit 0
//   an unknown flag   named, with the closest known flag when one is close, exit 2; so is a
//                     value its flag's type refuses, and an argument that is no flag
// Abseil's own flags (--helpfull, --flagfile, --fromenv, ...) keep working.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace codemode {

// A heading of --help and the flags under it (names without dashes), in the order shown.
struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;
};

// What --help says about a program. Every flag of the program is in exactly one group:
// --help lists one outside them under "Not in a group" and says so on stderr (tests
// run --help and want stderr empty).
struct ProgramHelp {
  std::string name;         // "sandboxd"
  std::string description;  // the first line of --help
  std::vector<FlagGroup> groups;
  // The program's own flags are those defined in a file whose path holds this; Abseil's
  // are not.
  std::string source_tree = "services/";
};

// What to do after reading argv: run (Abseil parses it next), or print and exit.
struct CommandLineAction {
  bool exit = false;
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// Reads argv for --help, -h, --version, unknown flags, values their flag refuses and
// arguments that are no flags (exit 2), in Abseil's syntax (--name=value, --name value,
// --name and --noname for booleans, "--" ends the flags). Names in --undefok are
// tolerated. Sets no flag.
CommandLineAction ReadCommandLine(int argc, char** argv, const ProgramHelp& program);

// The text of --help (`filter` empty) or --help=filter. Inconsistencies of the groups
// (a flag in none, a name that is no flag) are appended to `problems`.
std::string HelpText(const ProgramHelp& program, absl::string_view filter,
                     std::vector<std::string>* problems);

// The text of --version: "<name> <version> (git <revision>, <build type> build)".
std::string VersionText(absl::string_view name);

// The known flag name closest to `name` (dashes read as underscores), or "" when none is
// close enough to be a likely typo.
std::string ClosestFlagName(absl::string_view name, const std::vector<std::string>& known);

}  // namespace codemode
