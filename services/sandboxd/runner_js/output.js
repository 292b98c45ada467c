'use strict';
// Main-thread side of output: the worker posts each accepted write; OutputBatcher merges
// consecutive writes to a stream and sends `output` frames when OUTPUT_FLUSH_BYTES are
// buffered, OUTPUT_FLUSH_MS after the first unflushed write, before every tool_call frame and
// before `done`; a frame holds at most OUTPUT_FRAME_CHARS characters. The worker is not
// trusted, so the caps (`max_output_bytes`, `max_display_bytes`) are enforced here again:
// what this thread sends for one exec is bounded whatever the worker posts.

const { OUTPUT_FLUSH_BYTES, OUTPUT_FLUSH_MS, OUTPUT_FRAME_CHARS, escapeLoneSurrogates } =
  require('./common');

class OutputBatcher {
  constructor() {
    this.send = null;             // frame -> void, of the exec's connection; null: drop
    this.execId = null;
    this.chunks = [];             // [[stream, text], ...]
    this.buffered = 0;
    this.timer = null;
    this.budget = 0;
    this.bytes = 0;               // bytes accepted here
    this.dropped = 0;             // bytes over the cap that reached this thread anyway
    this.displayBudget = 0;
    this.displaysDropped = 0;     // displays over the cap that reached this thread anyway
  }

  begin(send, execId, maxOutputBytes, maxDisplayBytes = 0) {
    this.send = send;
    this.execId = execId;
    this.chunks = [];
    this.buffered = 0;
    this.budget = maxOutputBytes;
    this.bytes = 0;
    this.dropped = 0;
    this.displayBudget = maxDisplayBytes;
    this.displaysDropped = 0;
  }

  // One write from the worker (stream checked by the caller).
  add(stream, raw) {
    if (this.send === null) return;
    let text = escapeLoneSurrogates(raw);
    let size = Buffer.byteLength(text, 'utf8');
    if (size > this.budget) {
      const bytes = Buffer.from(text, 'utf8');
      let n = this.budget;
      while (n > 0 && (bytes[n] & 0xc0) === 0x80) n--;
      text = bytes.subarray(0, n).toString('utf8');
      this.dropped += size - n;
      size = n;
    }
    this.budget -= size;
    this.bytes += size;
    if (!text) return;
    const last = this.chunks[this.chunks.length - 1];
    if (last && last[0] === stream) last[1] += text;
    else this.chunks.push([stream, text]);
    this.buffered += size;
    if (this.buffered >= OUTPUT_FLUSH_BYTES) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), OUTPUT_FLUSH_MS);
  }

  // A line of the runner's own (that the namespace was lost), past the cap.
  note(stream, text) {
    if (this.send === null) return;
    this.chunks.push([stream, text]);
    this.bytes += Buffer.byteLength(text, 'utf8');
  }

  // A display ({mime: text}, counted against max_display_bytes by the worker as its JSON
  // with Python's separators, which is never shorter than JSON.stringify's): a frame of its
  // own, after the text written before it.
  display(bundle) {
    if (this.send === null) return;
    const size = Buffer.byteLength(JSON.stringify(bundle), 'utf8');
    if (size > this.displayBudget) {
      this.displaysDropped++;
      return;
    }
    this.displayBudget -= size;
    this.flush();
    this.send({ type: 'output', id: this.execId, chunks: [['display', bundle]] });
  }

  flush() {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const chunks = this.chunks;
    this.chunks = [];
    this.buffered = 0;
    if (!chunks.length || this.send === null) return;
    let frame = [];
    let chars = 0;
    for (const [stream, text] of chunks) {
      for (let start = 0; start < text.length;) {
        let piece = text.slice(start, start + OUTPUT_FRAME_CHARS - chars);
        // never split a surrogate pair across frames
        const last = piece.charCodeAt(piece.length - 1);
        if (piece.length > 1 && last >= 0xd800 && last <= 0xdbff) piece = piece.slice(0, -1);
        start += piece.length;
        frame.push([stream, piece]);
        chars += piece.length;
        if (chars >= OUTPUT_FRAME_CHARS - 1) {
          this.send({ type: 'output', id: this.execId, chunks: frame });
          frame = [];
          chars = 0;
        }
      }
    }
    if (frame.length) this.send({ type: 'output', id: this.execId, chunks: frame });
  }

  // Flush and stop; the counts the exec's `done` adds to the worker's own.
  finish() {
    this.flush();
    this.send = null;
    return { bytes: this.bytes, dropped: this.dropped, displaysDropped: this.displaysDropped };
  }
}

module.exports = { OutputBatcher };
