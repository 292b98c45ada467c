#include "base/command_line.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/version.h"

namespace codemode {
namespace {

bool IsOwnFlag(const absl::CommandLineFlag& flag, const ProgramHelp& program) {
  return absl::StrContains(flag.Filename(), program.source_tree);
}

// The program's own flags by name.
std::map<std::string, const absl::CommandLineFlag*> OwnFlags(const ProgramHelp& program) {
  std::map<std::string, const absl::CommandLineFlag*> own;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOwnFlag(*flag, program)) own.emplace(std::string(name), flag);
  }
  return own;
}

std::string ShownDefault(const absl::CommandLineFlag& flag) {
  const std::string value = flag.DefaultValue();
  return value.empty() ? "\"\"" : value;
}

// The first sentence of a flag's text: the one line --help shows.
std::string FirstSentence(absl::string_view help) {
  const size_t end = help.find(". ");
  return std::string(end == absl::string_view::npos ? help : help.substr(0, end + 1));
}

// `text` in lines of at most `width` columns (longer words stay whole), each indented.
std::string Wrapped(absl::string_view text, size_t indent, size_t width) {
  std::string out;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

bool Matches(absl::string_view name, const absl::CommandLineFlag& flag, absl::string_view filter) {
  const std::string lower = absl::AsciiStrToLower(filter);
  return absl::StrContains(absl::AsciiStrToLower(name), lower) ||
         absl::StrContains(absl::AsciiStrToLower(flag.Help()), lower);
}

// One flag as --help shows it: "--name=default", then its meaning.
std::string FlagEntry(absl::string_view name, const absl::CommandLineFlag& flag, bool whole) {
  return absl::StrCat("  --", name, "=", ShownDefault(flag), "\n",
                      Wrapped(whole ? flag.Help() : FirstSentence(flag.Help()), 6,
                              whole ? 80 : std::string::npos));
}

std::string Header(const ProgramHelp& program) {
  return absl::StrCat(
      program.description, "\n\nUsage: ", program.name, " [--flag=value ...]\n",
      "  --help, -h     these flags, by group, with their defaults\n",
      "  --help=WORD    only the flags whose name or text holds WORD, in full\n",
      "  --version      the version, the git revision built from and the build type\n",
      "  --helpfull     these and Abseil's own flags\n");
}

// One argument of argv read as a flag: "--name=value", "-name", ...
struct FlagArg {
  std::string name;
  bool has_value = false;
  std::string value;
};

FlagArg SplitFlagArg(absl::string_view arg) {
  absl::ConsumePrefix(&arg, "-");
  absl::ConsumePrefix(&arg, "-");
  FlagArg flag;
  const size_t eq = arg.find('=');
  flag.name = std::string(arg.substr(0, eq));
  if (eq != absl::string_view::npos) {
    flag.has_value = true;
    flag.value = std::string(arg.substr(eq + 1));
  }
  return flag;
}

// Abseil's help flags, which it reads itself and registers as no flag.
bool IsAbseilUsageFlag(absl::string_view name) {
  for (absl::string_view usage :
       {"helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "only_check_args"}) {
    if (name == usage) return true;
  }
  return false;
}

bool IsFlagArg(absl::string_view arg) { return arg.size() > 1 && arg[0] == '-'; }

// Names listed in --undefok anywhere on the command line.
std::set<std::string> UndefOk(int argc, char** argv) {
  std::set<std::string> names;
  for (int i = 1; i < argc && absl::string_view(argv[i]) != "--"; ++i) {
    if (!IsFlagArg(argv[i])) continue;
    FlagArg arg = SplitFlagArg(argv[i]);
    if (arg.name != "undefok") continue;
    if (!arg.has_value && i + 1 < argc) arg.value = argv[i + 1];
    for (absl::string_view name : absl::StrSplit(arg.value, ',', absl::SkipEmpty())) {
      names.emplace(name);
    }
  }
  return names;
}

std::string UnknownFlag(absl::string_view name) {
  std::vector<std::string> known = {"help", "version", "helpfull", "helpshort", "helpmatch"};
  for (const auto& [known_name, flag] : absl::GetAllFlags()) known.emplace_back(known_name);
  const std::string closest = ClosestFlagName(name, known);
  return absl::StrCat("unknown flag --", name,
                      closest.empty() ? "" : absl::StrCat("; did you mean --", closest, "?"));
}

// Whether `flag` takes `value`; the flag keeps its value.
std::string ValueError(absl::CommandLineFlag& flag, absl::string_view value) {
  const std::string before = flag.CurrentValue();
  std::string error;
  if (flag.ParseFrom(value, &error)) {
    std::string ignored;
    flag.ParseFrom(before, &ignored);
    return "";
  }
  return absl::StrCat("bad value for --", flag.Name(), ": ", error);
}

// The error of the flag argument argv[*i], or ""; advances *i past a separate value.
std::string CheckFlagArg(int argc, char** argv, int* i, const ProgramHelp& program,
                         const std::set<std::string>& undefok) {
  const FlagArg arg = SplitFlagArg(argv[*i]);
  if (IsAbseilUsageFlag(arg.name)) return "";
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg.name);
  if (flag == nullptr && absl::StartsWith(arg.name, "no")) {
    absl::CommandLineFlag* negated = absl::FindCommandLineFlag(arg.name.substr(2));
    if (negated != nullptr && negated->IsOfType<bool>()) {
      return arg.has_value ? absl::StrCat("--", arg.name, " takes no value") : "";
    }
  }
  if (flag == nullptr) return undefok.count(arg.name) ? "" : UnknownFlag(arg.name);
  if (!arg.has_value && flag->IsOfType<bool>()) return "";
  std::string value = arg.value;
  if (!arg.has_value) {
    if (*i + 1 >= argc) return absl::StrCat("--", arg.name, " needs a value");
    value = argv[++*i];
  }
  // Abseil's own flags (--flagfile, --fromenv, ...) are Abseil's to read.
  return IsOwnFlag(*flag, program) ? ValueError(*flag, value) : "";
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions, adjacent swaps.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestFlagName(absl::string_view name, const std::vector<std::string>& known) {
  const std::string wanted = absl::StrReplaceAll(name, {{"-", "_"}});
  const size_t allowed = wanted.size() <= 4 ? 1 : std::max<size_t>(2, wanted.size() / 4);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : known) {
    const size_t distance = EditDistance(wanted, candidate);
    if (distance < best_distance || (distance == best_distance && candidate < best)) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string HelpText(const ProgramHelp& program, absl::string_view filter,
                     std::vector<std::string>* problems) {
  std::map<std::string, const absl::CommandLineFlag*> own = OwnFlags(program);
  std::string out = Header(program);
  std::set<std::string> grouped;
  bool any = false;
  auto section = [&](absl::string_view title, const std::vector<std::string>& names) {
    std::string entries;
    for (const std::string& name : names) {
      auto it = own.find(name);
      if (it == own.end() || (!filter.empty() && !Matches(name, *it->second, filter))) continue;
      absl::StrAppend(&entries, FlagEntry(name, *it->second, !filter.empty()));
    }
    if (!entries.empty()) absl::StrAppend(&out, "\n", title, ":\n", entries);
    any = any || !entries.empty();
  };
  for (const FlagGroup& group : program.groups) {
    for (const std::string& name : group.flags) {
      if (!own.count(name)) problems->push_back(absl::StrCat("group '", group.title, "' names --", name, ", which is no flag of ", program.name));
      if (!grouped.insert(name).second) problems->push_back(absl::StrCat("--", name, " is in two groups"));
    }
    section(group.title, group.flags);
  }
  std::vector<std::string> ungrouped;
  for (const auto& [name, flag] : own) {
    if (grouped.count(name)) continue;
    ungrouped.push_back(name);
    problems->push_back(absl::StrCat("--", name, " is in no group of ", program.name, "'s --help"));
  }
  section("Not in a group", ungrouped);
  if (!any) absl::StrAppend(&out, "\nNo flag matches '", filter, "'.\n");
  return out;
}

std::string VersionText(absl::string_view name) {
  return absl::StrCat(name, " ", kVersion, " (git ", kGitRevision, ", ", kBuildType, " build)\n");
}

CommandLineAction ReadCommandLine(int argc, char** argv, const ProgramHelp& program) {
  CommandLineAction action;
  for (int i = 1; i < argc && absl::string_view(argv[i]) != "--"; ++i) {
    if (!IsFlagArg(argv[i])) continue;
    const FlagArg arg = SplitFlagArg(argv[i]);
    if (arg.name == "help" || arg.name == "h") {
      std::vector<std::string> problems;
      action.out = HelpText(program, arg.value, &problems);
      for (const std::string& problem : problems) absl::StrAppend(&action.err, "help: ", problem, "\n");
      action.exit = true;
      return action;
    }
    if (arg.name == "version") {
      action.out = VersionText(program.name);
      action.exit = true;
      return action;
    }
  }
  const std::set<std::string> undefok = UndefOk(argc, argv);
  std::vector<std::string> errors;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!IsFlagArg(arg)) {
      errors.push_back(absl::StrCat("unexpected argument '", arg, "': ", program.name,
                                    " takes flags only"));
      continue;
    }
    std::string error = CheckFlagArg(argc, argv, &i, program, undefok);
    if (!error.empty()) errors.push_back(std::move(error));
  }
  if (errors.empty()) return action;
  for (const std::string& error : errors) absl::StrAppend(&action.err, program.name, ": ", error, "\n");
  absl::StrAppend(&action.err, program.name, " --help lists the flags\n");
  action.exit = true;
  action.exit_code = 2;
  return action;
}

}  // namespace codemode
