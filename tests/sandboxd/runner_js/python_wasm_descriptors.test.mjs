// The wasm tier's Python sessions: the descriptors a cell reaches through Pyodide's file
// system and Node's objects (descriptors.js, fs_descriptors.js, locks.js). A runner of its
// own, started cold (no snapshot), as python_wasm.test.mjs starts one.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { WasmRunner } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('python in pyodide (wasm tier): descriptors', () => {
  let runner;
  let client;
  before(async () => {
    runner = await WasmRunner.start({ language: 'python', heapMb: 256, env: [] });
    [client] = await runner.connect();
    // A cold start (no snapshot) imports the runner's modules at the first cell.
    assert.equal((await client.exec('1 + 1', { timeout: 60000 })).result, '2');
  });
  after(() => runner && runner.stop());

  // Pyodide's file system writes by descriptor number, and threads share the process's.
  it('cannot write on a descriptor of the runner through a file stream', async () => {
    const r = await client.exec('import pyodide_js, json, os\n' +
      'from pyodide.ffi import to_js\n' +
      'refused = []\n' +
      'for fd in range(3, 64):\n' +
      '    s = pyodide_js.FS.open("/workspace/nfd.txt", "w")\n' +
      '    s.nfd = fd\n' +
      '    try:\n' +
      '        s.stream_ops.write(s, to_js(b"A" * 16), 0, 16, None)\n' +
      '    except Exception as e:\n' +
      '        refused.append(fd)\n' +
      'len(refused)');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.ok(Number(r.result) >= 3, `${r.result} descriptors refused`);
    assert.equal((await client.exec('1 + 1')).result, '2');
    assert.equal(runner.exited, null);
  });

  // The descriptor check runs on every write: a Set method a cell replaces (JavaScript's
  // built-ins are a Python cell's too, through any JS object) must not vouch for a number.
  it('writes no frame on the runner\'s connection whatever built-in a cell replaces', async () => {
    const fds = `/proc/${runner.proc.pid}/fd`;
    const isSocket = (fd) => {
      try {
        return fs.readlinkSync(`${fds}/${fd}`).startsWith('socket:');
      } catch {
        return false;      // closed since the listing
      }
    };
    const conn = Math.max(...fs.readdirSync(fds).map(Number).filter((fd) => fd > 3 && isSocket(fd)));
    assert.ok(conn > 3, 'the runner holds no connection');
    const r = await client.exec(`import pyodide_js, json
from pyodide.ffi import to_js
try:
    to_js({1}).constructor.prototype.has = pyodide_js.constructor
except Exception:
    pass
body = json.dumps({"type": "forged", "id": 1}).encode()
frame = len(body).to_bytes(4, "big") + body
s = pyodide_js.FS.open("/workspace/replaced.txt", "w")
s.nfd = ${conn}
try:
    s.stream_ops.write(s, to_js(frame), 0, len(frame), None)
except Exception:
    frame = None
frame is None`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, 'True');
    await client.reset();
    assert.equal((await client.exec('1 + 1', { timeout: 20000 })).result, '2');
  });

  // Object.prototype is writable in the Python worker, and Node's native requests got their
  // callbacks by assignment through it (a readFile job's `ondone`): told the file came back
  // open on the runner's connection, Node read and closed the connection.
  it('hands Python code no request of Node\'s through Object.prototype', async () => {
    const fds = `/proc/${runner.proc.pid}/fd`;
    const conn = Math.max(...fs.readdirSync(fds).map(Number).filter((fd) => {
      try {
        return fd > 3 && fs.readlinkSync(`${fds}/${fd}`).startsWith('socket:');
      } catch {
        return false;
      }
    }));
    const r = await client.exec(`import js, pyodide_js
from pyodide.ffi import create_proxy, to_js
O = js.constructor
d = lambda **kw: to_js(kw, dict_converter=O.fromEntries)
seen = []
def setter(key):
    def set(this, v):
        seen.append(key)
        lent = (lambda *a: v(None, None, ${conn}, 64)) if key == 'ondone' else v
        O.defineProperty(this, key, d(value=create_proxy(lent), writable=True, configurable=True))
    return set
for key in ['ondone', 'oncomplete']:
    O.defineProperty(O.prototype, key, d(set=create_proxy(setter(key), capture_this=True), configurable=True))
try:
    await pyodide_js.loadPackage('micropip')
finally:
    for key in ['ondone', 'oncomplete']:
        delattr(O.prototype, key)
",".join(seen)`, { timeout: 30000 });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, "''");
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // Pyodide's file streams close their `nfd` through fs.closeSync: a number the cell puts
  // there is refused unless the worker's fs opened it (here, an upload's the main thread holds).
  it('closes no descriptor of the runner through a file stream\'s nfd', async () => {
    client.send({ type: 'file_upload', id: 7, path: 'up.bin', max_bytes: 1000 });
    await sleep(300);
    const uploads = () => fs.readdirSync(`/proc/${runner.proc.pid}/fd`).filter((n) => {
      try {
        return path.basename(fs.readlinkSync(`/proc/${runner.proc.pid}/fd/${n}`)).startsWith('.upload-');
      } catch {
        return false;
      }
    }).map(Number);
    const before = uploads();
    assert.ok(before.length > 0, 'the upload holds no descriptor of its file');
    const r = await client.exec('import pyodide_js\n' +
      'streams = [pyodide_js.FS.open("/workspace/nfd.txt", "w") for _ in range(61)]\n' +
      'first = min(s.nfd for s in streams)\n' +
      'closed = []\n' +
      'for fd, s in zip(range(3, first), streams):\n' +
      '    s.nfd = fd\n' +
      '    try:\n        pyodide_js.FS.close(s)\n        closed.append(fd)\n' +
      '    except Exception:\n        pass\n' +
      'closed');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const closed = JSON.parse(r.result);
    assert.deepEqual(before.filter((fd) => closed.includes(fd)), [], `closed ${r.result}`);
    assert.deepEqual(uploads(), before);
    const [second] = await runner.connect();
    assert.equal((await second.exec('1 + 1', { timeout: 20000 })).result, '2');
    client = second;
  });
});
