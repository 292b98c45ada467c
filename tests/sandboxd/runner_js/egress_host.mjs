// sandboxd's side of the egress relay in the runner tests: connections parked on the
// relay's egress.sock, as the proxy's parked dialer makes them, and what they answer.
import assert from 'node:assert/strict';
import net from 'node:net';

export const RESPONSE = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: 1\r\nContent-Length: 11\r\n' +
  'Connection: close\r\n\r\nhello relay';

// A cell whose result is 'fetched' or 'failed: ' and why fetch(url) failed.
export const fetchOutcome = (url) => `let outcome; try { await fetch('${url}'); outcome = 'fetched' } ` +
  "catch (e) { outcome = 'failed: ' + (e.cause && e.cause.message || e) } outcome";

// A host connection to egress.sock, as sandboxd's parked dialer makes; buffers what arrives.
export class Parked {
  static open(socketPath) {
    return new Promise((resolve, reject) => {
      const s = net.createConnection({ path: socketPath, allowHalfOpen: true }, () => resolve(new Parked(s)));
      s.once('error', reject);
    });
  }

  constructor(socket) {
    Object.assign(this, { socket, data: Buffer.alloc(0), ended: false, waiters: [] });
    socket.on('data', (d) => { this.data = Buffer.concat([this.data, d]); this.wake(); });
    socket.on('end', () => { this.ended = true; this.wake(); });
    socket.on('close', () => { this.ended = true; this.wake(); });
    socket.on('error', () => {});
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  // Resolves once `done(data)` holds; fails after `timeout` ms or at EOF before it.
  async until(done, what, timeout = 10000) {
    const deadline = Date.now() + timeout;
    while (!done(this.data)) {
      if (this.ended) throw new Error(`EOF before ${what}; got ${JSON.stringify(this.data.toString('latin1'))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeout} ms; got ${JSON.stringify(this.data.toString('latin1'))}`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
    return this.data;
  }

  async head(timeout = 10000) {
    const data = await this.until((d) => d.includes('\r\n\r\n'), 'request head', timeout);
    const end = data.indexOf('\r\n\r\n') + 4;
    this.data = data.subarray(end);
    return data.subarray(0, end).toString('latin1');
  }
}

// A fetch of https://other.test/ that `host` refuses as the proxy does: the exec's result,
// the error the fetch failed with.
export async function refusedFetch(client, host) {
  const id = client.startExec(fetchOutcome('https://other.test/'));
  await host.head();
  const body = "egress refused: other.test:443 is not in the session's egress policy";
  host.socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  return (await client.finishExec(id)).result;
}

// Exec `id`'s request arrives on `host` as `headPattern` and is answered with RESPONSE;
// returns the head and the exec's result.
export async function answerWith(client, host, id, headPattern) {
  const head = await host.head();
  assert.match(head, headPattern);
  host.socket.end(RESPONSE);
  const r = await client.finishExec(id);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  return [head, r.result];
}
