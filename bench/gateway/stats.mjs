// The statistics every part of gateway_bench prints, and how the benchmarks write their reports.
import fs from "node:fs";

// The p-th percentile (0-100) of `values`, nearest rank.
export function pct(values, p) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// A latency in milliseconds as the tables print it.
export const ms = (v) => `${v.toFixed(2)} ms`;

// Writes `table` to `outFile`, keeping that file's text from "Notes (by hand" on: the notes
// written by hand below a generated table stay (as sandboxd_bench keeps its end marker).
export function writeReport(outFile, table) {
  const NOTES = "Notes (by hand";
  const old = fs.existsSync(outFile) ? fs.readFileSync(outFile, "utf8") : "";
  const notes = old.indexOf(NOTES) >= 0 ? old.slice(old.indexOf(NOTES)) : "";
  fs.writeFileSync(outFile, table + notes);
}
