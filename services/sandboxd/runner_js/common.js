'use strict';
// What every module of the JavaScript runner shares: the limits of docs/runner-protocol.md,
// the runner's own log, caps with visible markers, and the lone-surrogate escaping that keeps
// every frame valid UTF-8 (sandboxd's JSON parser refuses a `\udXXX` escape that is not half
// of a pair).

const RUNNER_VERSION = 2;                          // 2: binary file_chunk frames
const MAX_FRAME_BYTES = 16 * 1024 * 1024;          // both directions
const OUTPUT_FLUSH_BYTES = 8 * 1024;               // flush output when this much is buffered ...
const OUTPUT_FLUSH_MS = 5;                         // ... or this long after the first write
const OUTPUT_FRAME_CHARS = 1024 * 1024;            // text per output frame
const RESULT_LIMIT = 64 * 1024;                    // chars of the trailing expression's inspect
const ERROR_MESSAGE_LIMIT = 64 * 1024;
const TRACEBACK_LIMIT = 256 * 1024;
// The frames a cell's error keeps (Error.stackTraceLimit of the user's thread).
const STACK_TRACE_LIMIT = 50;
const DEFAULT_TOOL_CALLS_IN_FLIGHT = 64;
// Arrays and objects one tool-call argument may nest: the tool_call frame adds two levels
// (the frame, `arguments`) and sandboxd refuses frames deeper than 128 (runner-protocol.md).
const MAX_ARGUMENT_DEPTH = 120;
// JSON values (objects, arrays, strings, numbers, ...) one tool call's arguments may hold:
// sandboxd refuses a frame of more than one value per 128 bytes of its 16 MiB cap (131,072;
// runner-protocol.md), and the frame's own fields are a few more.
const MAX_ARGUMENT_VALUES = 131072 - 16;
// How long an interrupted exec may take to end before its worker is terminated (the
// namespace is then reset): an interrupt lands within milliseconds on an idle machine but
// may wait for the worker's thread to be scheduled on a loaded one. With
// WORKER_EXIT_WAIT_MS it stays within sandboxd's default 2 s --kill_grace.
const INTERRUPT_GRACE_MS = 1000;
// How long a namespace reset waits for the terminated worker to exit before its last kill.
// One that has not exited by then is stuck in a system call (terminate lands only in
// JavaScript) and keeps its thread and memory until the call returns; when STUCK_WORKER_LIMIT
// are stuck at once the runner ends (the session is lost) rather than grow to the memory
// limit (runner-protocol.md, "Workers stuck in a system call").
const WORKER_EXIT_WAIT_MS = 500;
const STUCK_WORKER_LIMIT = 3;
const WATCHDOG_PING_MS = 2000;                     // idle worker pinged this often (watchdog.js) ...
const DEFAULT_IDLE_WATCHDOG_MS = 5000;             // ... and replaced without a pong this soon
const CELL_PREFIX = '<cell-';                      // file names of agent code: <cell-1>, ...

// A verdict timer ("did not answer", "did not exit", "did not stop") that fires this much
// later than asked was held up itself: the runner did not run (the wasm tier's CPU limit
// stops it with SIGSTOP; a loaded machine schedules its main thread first once it runs
// again), and neither, most likely, did the worker it judges, whose answer then waits behind
// the timer. It is armed again for the time it missed, at most VERDICT_REARMS times.
const VERDICT_LATE_MS = 100;
const VERDICT_REARMS = 3;

// setTimeout for a verdict: `fn` runs once `ms` have passed in which the runner's own timers
// ran on time (VERDICT_LATE_MS), or after VERDICT_REARMS extensions. Returns a handle for
// clearVerdictTimeout.
function verdictTimeout(fn, ms, { unref = false } = {}) {
  const handle = { timer: null };
  let rearms = 0;
  const arm = (wait) => {
    const due = performance.now() + wait;
    handle.timer = setTimeout(() => {
      const late = performance.now() - due;
      if (late > VERDICT_LATE_MS && rearms < VERDICT_REARMS) {
        rearms++;
        arm(Math.min(ms, late));
        return;
      }
      handle.timer = null;
      fn();
    }, wait);
    if (unref) handle.timer.unref();
  };
  arm(ms);
  return handle;
}

function clearVerdictTimeout(handle) {
  if (handle && handle.timer) clearTimeout(handle.timer);
  if (handle) handle.timer = null;
}

function log(message) {
  try {
    process.stderr.write(`sandbox_runner.js: ${message}\n`);
  } catch (e) {
    // the runner's log must never fail the runner
  }
}

// `text` cut to `limit` chars with a marker saying how much was cut.
function cap(text, limit) {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}...[truncated ${text.length - limit} chars]`;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

// Lone surrogates written as the six characters `\udXXX` (Python's backslashreplace), so the
// text encodes to valid UTF-8 and its byte count is what goes out.
function escapeLoneSurrogates(text) {
  LONE_SURROGATE.lastIndex = 0;
  if (!LONE_SURROGATE.test(text)) return text;
  return text.replace(LONE_SURROGATE, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

// JSON.stringify writes a lone surrogate as the escape `\udXXX`, which nlohmann::json
// refuses; turn each such escape into the escaped backslash plus `udXXX` (the same six
// visible characters). Pairs of `\\` are consumed first so an escaped backslash followed by
// "ud..." text is left alone.
function fixJsonSurrogates(json) {
  if (json.indexOf('\\ud') < 0 && json.indexOf('\\uD') < 0) return json;
  return json.replace(/\\\\|\\u([dD][89abcdefABCDEF][0-9a-fA-F]{2})/g,
    (match, hex) => (hex ? `\\\\u${hex.toLowerCase()}` : match));
}

// Hands the data of each message on `port` to `onData`. No message of the runner's
// protocols carries a port: every port one brings, wherever in it, is closed at once. One
// left open would queue what its other end posts, in this process and outside every heap
// limit, for as long as the process lives.
function onPortData(port, onData) {
  port.addEventListener('message', (event) => {
    for (const stray of event.ports || []) stray.close();
    onData(event.data);
  });
}

module.exports = {
  RUNNER_VERSION, MAX_FRAME_BYTES, OUTPUT_FLUSH_BYTES, OUTPUT_FLUSH_MS, OUTPUT_FRAME_CHARS,
  RESULT_LIMIT, ERROR_MESSAGE_LIMIT, TRACEBACK_LIMIT, STACK_TRACE_LIMIT, DEFAULT_TOOL_CALLS_IN_FLIGHT, MAX_ARGUMENT_DEPTH,
  MAX_ARGUMENT_VALUES,
  INTERRUPT_GRACE_MS, WORKER_EXIT_WAIT_MS, STUCK_WORKER_LIMIT, WATCHDOG_PING_MS, DEFAULT_IDLE_WATCHDOG_MS, CELL_PREFIX, log, cap, escapeLoneSurrogates, fixJsonSurrogates,
  verdictTimeout, clearVerdictTimeout, onPortData,
};
