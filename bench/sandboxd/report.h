// sandboxd_bench's report: the machine lines, one table row per measurement with its
// target and PASS/FAIL, notes and errors; how it is rendered as markdown, and how it is
// written to the --out file (keeping the hand-written text below the end marker).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sandboxd_bench {

struct Row {
  std::string id;
  std::string what;
  std::string result;
  std::string target;  // empty: informational
  std::string status;  // PASS, FAIL, ERROR, info
};

struct Report {
  std::vector<std::pair<std::string, std::string>> machine;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  std::vector<std::string> errors;

  void Info(std::string id, std::string what, std::string result);
  // value <= limit passes.
  void Target(std::string id, std::string what, double value, double limit,
              std::string result, std::string target);
  void Error(const std::string& what);

  std::string Markdown(const std::string& command) const;
};

// Writes `md` to `path`, followed by the line "<!-- end of generated report -->" and
// whatever followed that line in the file before. False when the file cannot be written.
bool WriteReport(const std::string& path, const std::string& md);

}  // namespace sandboxd_bench
