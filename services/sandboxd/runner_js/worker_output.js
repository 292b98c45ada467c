'use strict';
// Worker side of output capture: what user code writes through console.* and
// process.stdout/stderr.write during an exec. The cap (`max_output_bytes`, UTF-8 bytes, cut
// at a character boundary, the rest only counted) is applied here so a print loop past the
// cap posts nothing; every accepted write is posted at once to the main thread, which batches
// it into `output` frames (its timers run while this thread is stuck in a loop) and checks
// the cap again (this thread runs user code and is not trusted).

const { Console } = require('console');
const { escapeLoneSurrogates } = require('./common');

const byteLength = Buffer.byteLength;
const bufferFrom = Buffer.from;
const StringCtor = String;

// Text written to a stream: strings as they are, bytes decoded as UTF-8.
function asText(chunk, encoding) {
  if (typeof chunk === 'string') return chunk;
  if (chunk instanceof Uint8Array) {
    return bufferFrom(chunk.buffer, chunk.byteOffset, chunk.byteLength)
      .toString(typeof encoding === 'string' && Buffer.isEncoding(encoding) ? encoding : 'utf8');
  }
  return StringCtor(chunk);
}

class OutputCapture {
  constructor(post) {
    this.post = post;             // captured postMessage of the worker port
    this.active = false;
    this.budget = 0;
    this.outputBytes = 0;
    this.droppedBytes = 0;
  }

  begin(maxOutputBytes) {
    this.active = true;
    this.budget = maxOutputBytes;
    this.outputBytes = 0;
    this.droppedBytes = 0;
  }

  finish() {
    this.active = false;
    return { outputBytes: this.outputBytes, droppedBytes: this.droppedBytes };
  }

  write(stream, raw) {
    if (!this.active) return;     // writes outside an exec are dropped
    let text = escapeLoneSurrogates(raw);
    if (!text) return;
    let size = byteLength(text, 'utf8');
    this.outputBytes += size;
    if (this.budget <= 0) {
      this.droppedBytes += size;
      return;
    }
    if (size > this.budget) {
      const bytes = bufferFrom(text, 'utf8');
      let n = this.budget;
      while (n > 0 && (bytes[n] & 0xc0) === 0x80) n--;   // a character boundary
      text = bytes.subarray(0, n).toString('utf8');
      this.droppedBytes += size - n;
      size = n;
      this.budget = 0;
    } else {
      this.budget -= size;
    }
    if (text) this.post({ t: 'out', s: stream, x: text });
  }

  // A writable-stream stand-in for `stream` ('stdout' or 'stderr').
  stream(stream) {
    const capture = this;
    return {
      write(chunk, encoding, callback) {
        capture.write(stream, asText(chunk, encoding));
        const cb = typeof encoding === 'function' ? encoding : callback;
        if (typeof cb === 'function') process.nextTick(cb);
        return true;
      },
      isTTY: false,
      columns: 80,
      on() { return this; }, once() { return this; }, removeListener() { return this; },
      listenerCount() { return 0; },
      end() {},
    };
  }

  // console (log/info/debug -> stdout, error/warn/trace -> stderr) and
  // process.stdout/stderr.write for user code.
  install() {
    const out = this.stream('stdout');
    const err = this.stream('stderr');
    globalThis.console = new Console({ stdout: out, stderr: err, colorMode: false,
      ignoreErrors: false });
    process.stdout.write = out.write;
    process.stderr.write = err.write;
  }
}

module.exports = { OutputCapture };
