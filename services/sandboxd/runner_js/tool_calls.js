'use strict';
// Main-thread side of tool calls: the calls the worker posts become `tool_call` frames with
// call ids unique for the process lifetime (c1, c2, ...), at most `max_tool_calls_in_flight`
// of one exec unanswered at a time (the others wait here, in order); `tool_result` frames
// are converted to the value the call returns (convertToolResult, as the Python runner's
// tool_calls.py) and posted back; for a Python session the frame's JSON text is posted
// ({frame}) and Python converts it with the container runner's own code. Late results and
// results of other connections are ignored.

const { MAX_ARGUMENT_VALUES, MAX_FRAME_BYTES } = require('./common');
const { FRAME_TEXT, FrameTooLarge } = require('./protocol');
const { isObject, jsonProblem } = require('./catalog');

// {ok: true, value} or {ok: false, message} for a tool_result frame.
function convertToolResult(reply) {
  if (!reply.ok) {
    const error = reply.error;
    return { ok: false, message: typeof error === 'string' && error ? error : 'tool call failed' };
  }
  const result = reply.result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    return { ok: false, message: 'malformed tool result' };
  }
  let content = result.content === undefined || result.content === null ? [] : result.content;
  if (!Array.isArray(content)) return { ok: false, message: 'malformed tool result' };
  const isText = (b) => b !== null && typeof b === 'object' && typeof b.text === 'string';
  if (result.isError) {
    const texts = content.filter(isText).map((b) => b.text);
    return { ok: false, message: texts.join('\n') || 'the tool reported an error' };
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return { ok: true, value: result.structuredContent };
  }
  if (content.length === 1 && isText(content[0]) && content[0].type === 'text') {
    try {
      return { ok: true, value: JSON.parse(content[0].text) };
    } catch (e) {
      return { ok: true, value: content[0].text };
    }
  }
  return { ok: true, value: content };
}

// Why the arguments a call posted cannot go out, or null. The worker checked them, but a
// getter can give another value when they are cloned to this thread: this is the copy that
// goes out (too deep for sandboxd, circular, or not JSON would cost the connection).
function argumentsProblem(args) {
  if (!isObject(args)) return 'the arguments are not an object';
  const budget = { left: MAX_ARGUMENT_VALUES };  // all of them together, as sandboxd counts
  for (const key of Object.keys(args)) {
    const problem = jsonProblem(args[key], 0, budget);
    if (problem) return `argument '${key}' is not JSON-serializable: ${problem}`;
  }
  return null;
}

// The calls of one exec: sent, waiting for a slot, and the slot count.
class ExecCalls {
  constructor(execId, conn, limit) {
    this.execId = execId;
    this.conn = conn;
    this.free = limit;
    this.waiting = [];            // calls not sent yet, in order
    this.closed = false;
  }
}

class ToolCalls {
  // `frameText`: results are posted as the tool_result frame's JSON text.
  constructor(frameText = false) {
    this.frameText = frameText;
    this.nextId = 1;
    this.pending = new Map();     // call_id -> {calls, k, reply}
  }

  // A call posted by the worker ({k, server, tool, args}); `reply(k, result)` answers it.
  submit(calls, call, reply, flushOutput) {
    if (calls.closed) {
      reply(call.k, { ok: false, message: 'the execution ended before the tool call was sent' });
      return;
    }
    calls.waiting.push({ call, reply });
    this.pump(calls, flushOutput);
  }

  pump(calls, flushOutput) {
    while (calls.free > 0 && calls.waiting.length && !calls.closed) {
      const { call, reply } = calls.waiting.shift();
      const callId = `c${this.nextId++}`;
      const problem = argumentsProblem(call.args);
      if (problem) {
        reply(call.k, { ok: false, message: problem });
        continue;
      }
      flushOutput();              // output printed before the call arrives first
      let sent;
      try {
        sent = calls.conn.send({ type: 'tool_call', id: calls.execId, call_id: callId,
          server: call.server, tool: call.tool, arguments: call.args });
      } catch (e) {
        if (!(e instanceof FrameTooLarge)) throw e;
        reply(call.k, { ok: false, message: `arguments too large (${e.size} bytes; the frame ` +
          `cap is ${MAX_FRAME_BYTES} bytes)` });
        continue;
      }
      if (!sent) {
        reply(call.k, { ok: false, message: 'sandboxd connection lost' });
        continue;
      }
      calls.free--;
      this.pending.set(callId, { calls, k: call.k, reply, flushOutput });
    }
  }

  // A tool_result frame from `conn`.
  resolve(conn, frame) {
    const entry = this.pending.get(frame.call_id);
    if (!entry || entry.calls.conn !== conn) return;
    this.pending.delete(frame.call_id);
    entry.calls.free++;
    entry.reply(entry.k, this.frameText && typeof frame[FRAME_TEXT] === 'string' ?
      { frame: frame[FRAME_TEXT] } : convertToolResult(frame));
    this.pump(entry.calls, entry.flushOutput);
  }

  // The exec ended (or its connection died): nothing more is sent; calls in flight and
  // waiting ones are answered with `message`.
  close(calls, message) {
    calls.closed = true;
    for (const { call, reply } of calls.waiting.splice(0)) reply(call.k, { ok: false, message });
    for (const [callId, entry] of this.pending) {
      if (entry.calls !== calls) continue;
      this.pending.delete(callId);
      entry.reply(entry.k, { ok: false, message });
    }
  }
}

module.exports = { ToolCalls, ExecCalls, convertToolResult };
