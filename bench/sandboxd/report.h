// sandboxd_bench's report: the machine lines, one table row per measurement with a result,
// target and PASS/FAIL for each isolation mode measured (one column each, side by side),
// notes and errors; how it is rendered as markdown, and how it is written to the --out
// file (keeping the hand-written text below the end marker).
//
//   Report r;
//   r.BeginColumn("container");          // every row added now fills this column
//   r.Target("1", "Execute p50", 0.4, 1.0, "0.400 ms", "≤ 1 ms");
//   r.BeginColumn("gVisor");
//   r.Target("1", "Execute p50", 1.2, 3.0, "1.200 ms", "≤ 3 ms");   // same row, next column
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sandboxd_bench {

struct Cell {
  std::string result;  // empty: not measured in this column
  std::string target;  // empty: informational
  std::string status;  // PASS, FAIL, ERROR, info
};

struct Row {
  std::string id;
  std::string what;
  std::vector<Cell> cells;  // one per column
};

struct Report {
  std::vector<std::pair<std::string, std::string>> machine;
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  std::vector<std::string> errors;

  // Rows, notes and errors added from now on belong to a new column `name`.
  void BeginColumn(std::string name);

  void Info(std::string id, std::string what, std::string result);
  // value <= limit passes.
  void Target(std::string id, std::string what, double value, double limit,
              std::string result, std::string target);
  // value >= limit passes (a throughput).
  void TargetAtLeast(std::string id, std::string what, double value, double limit,
                     std::string result, std::string target);
  // Notes and errors name the column when there are several.
  void Note(const std::string& text);
  void Error(const std::string& what);

  std::string Markdown(const std::string& command) const;

 private:
  void Add(std::string id, std::string what, Cell cell);
  std::string Prefix() const;
};

// Writes `md` to `path`, followed by the line "<!-- end of generated report -->" and
// whatever followed that line in the file before. False when the file cannot be written.
bool WriteReport(const std::string& path, const std::string& md);

}  // namespace sandboxd_bench
