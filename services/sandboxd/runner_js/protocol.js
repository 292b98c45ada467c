'use strict';
// The frame protocol of docs/runner-protocol.md: a 4-byte big-endian length and a UTF-8 JSON
// object with a string `type`; from sandboxd also the binary file_chunk (length's top bit
// set). FrameReader parses what a socket delivers; encodeFrame builds what the runner sends.

const { MAX_FRAME_BYTES, fixJsonSurrogates } = require('./common');

const BINARY_FRAME = 0x80000000;

// A tool_result frame's own JSON text, under this key (not enumerable): a Python session
// parses it with json.loads, which keeps what JSON.parse loses (5.0 a float, integers over
// 2**53 exact), as the container's Python runner does.
const FRAME_TEXT = Symbol('frame text');

class ProtocolError extends Error {}

class FrameTooLarge extends Error {
  constructor(size) {
    super(`frame of ${size} bytes exceeds the ${MAX_FRAME_BYTES} byte cap`);
    this.size = size;
  }
}

// The body (UTF-8 JSON, no length) of a frame; FrameTooLarge when over the cap.
function encodeBody(frame) {
  const body = Buffer.from(fixJsonSurrogates(JSON.stringify(frame)), 'utf8');
  if (body.length > MAX_FRAME_BYTES) throw new FrameTooLarge(body.length);
  return body;
}

function withLength(body) {
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(body.length, 0);
  return [head, body];
}

// Incremental parser: push() socket data, then next() returns frames until it returns null.
// Throws ProtocolError on a frame over the cap, bad JSON or a non-object.
class FrameReader {
  constructor() {
    this.parts = [];
    this.size = 0;
  }

  push(data) {
    this.parts.push(data);
    this.size += data.length;
  }

  take(n) {
    const all = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.size);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.parts = rest.length ? [rest] : [];
    this.size = rest.length;
    return out;
  }

  peekLength() {
    if (this.parts[0].length < 4) this.parts = [Buffer.concat(this.parts, this.size)];
    return this.parts[0].readUInt32BE(0);
  }

  next() {
    if (this.size < 4) return null;
    const raw = this.peekLength();
    const binary = (raw & BINARY_FRAME) !== 0;
    const length = binary ? raw - BINARY_FRAME : raw;
    if (length > MAX_FRAME_BYTES || (binary && length < 8)) {
      throw new ProtocolError(`frame of ${length} bytes (cap ${MAX_FRAME_BYTES})`);
    }
    if (this.size < 4 + length) return null;
    this.take(4);
    const body = Buffer.from(this.take(length));     // own copy: the rest may be reused
    if (binary) {
      const id = Number(body.readBigUInt64BE(0));
      return { type: 'file_chunk', id, data: body.subarray(8) };
    }
    let frame;
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(body);
      frame = JSON.parse(text);
    } catch (e) {
      throw new ProtocolError(`frame is not valid UTF-8 JSON: ${e.message}`);
    }
    if (frame === null || typeof frame !== 'object' || Array.isArray(frame) ||
        typeof frame.type !== 'string') {
      throw new ProtocolError("frame is not a JSON object with a string 'type'");
    }
    if (frame.type === 'tool_result') frame[FRAME_TEXT] = text;
    return frame;
  }
}

const KINDS = {
  int: (v) => Number.isSafeInteger(v),
  str: (v) => typeof v === 'string',
  bool: (v) => typeof v === 'boolean',
  object: (v) => v !== null && typeof v === 'object' && !Array.isArray(v),
};

// A required inbound field, type-checked ('int', 'str', 'bool', 'object').
function frameField(frame, name, kind) {
  if (!Object.prototype.hasOwnProperty.call(frame, name)) {
    throw new ProtocolError(`${frame.type} frame lacks field '${name}'`);
  }
  const value = frame[name];
  if (!KINDS[kind](value)) throw new ProtocolError(`${frame.type}.${name} must be ${kind}`);
  return value;
}

module.exports = { FRAME_TEXT, ProtocolError, FrameTooLarge, FrameReader, encodeBody, withLength, frameField };
