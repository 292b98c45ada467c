// The statistics every part of gateway_bench prints.

// The p-th percentile (0-100) of `values`, nearest rank.
export function pct(values, p) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// A latency in milliseconds as the tables print it.
export const ms = (v) => `${v.toFixed(2)} ms`;
