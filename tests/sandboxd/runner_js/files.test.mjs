// File frames: upload (JSON and binary chunks), download, list, and the refusals: paths out of
// the workspace, symlinks anywhere on the way (user code plants them), caps.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer } from './harness.mjs';

describe('javascript runner: files', () => {
  let runner;
  let client;
  let nextId = 1;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  const binaryChunk = (id, data) => {
    const body = Buffer.alloc(8 + data.length);
    body.writeBigUInt64BE(BigInt(id));
    data.copy(body, 8);
    client.sendRaw(body, (0x80000000 | body.length) >>> 0);
  };

  async function upload(path, data, { binary = false, max = 1 << 20 } = {}) {
    const id = nextId++;
    client.send({ type: 'file_upload', id, path, max_bytes: max });
    if (binary) binaryChunk(id, data);
    else client.send({ type: 'file_chunk', id, data: data.toString('base64') });
    client.send({ type: 'file_commit', id });
    return client.recv();
  }

  async function download(path, max = 1 << 20) {
    const id = nextId++;
    client.send({ type: 'file_download', id, path, max_bytes: max });
    const parts = [];
    for (;;) {
      const f = await client.recv();
      if (f.type === 'file_data') parts.push(Buffer.from(f.data, 'base64'));
      else return [f, Buffer.concat(parts)];
    }
  }

  it('uploads, downloads and lists files', async () => {
    const w = await upload('dir/sub/a.txt', Buffer.from('hello'));
    assert.deepEqual([w.type, w.size], ['file_written', 5]);
    const b = await upload('bin.dat', Buffer.from([0, 1, 2, 255]), { binary: true });
    assert.deepEqual([b.type, b.size], ['file_written', 4]);
    const [read, data] = await download('dir/sub/a.txt');
    assert.equal(read.type, 'file_read');
    assert.equal(data.toString(), 'hello');
    assert.equal(read.size, 5);
    const seen = await client.exec('require("fs").readFileSync("/workspace/bin.dat").toString("hex")');
    assert.equal(seen.result, "'000102ff'");
    client.send({ type: 'file_list', id: 77, path: '', max_entries: 10 });
    const list = await client.expect('file_list_result');
    assert.deepEqual(list.entries.map((e) => [e.path, e.type]), [['bin.dat', 'file'], ['dir', 'directory']]);
    assert.equal(list.truncated, false);
  });

  it('refuses paths out of the workspace', async () => {
    for (const path of ['/etc/passwd', '../x', 'a/../../x', '', 'a\0b']) {
      const [f] = await download(path);
      assert.equal(f.type, 'file_error', path);
      assert.equal(f.code, 'invalid_argument', path);
    }
  });

  it('never follows a symlink user code planted', async () => {
    const r = await client.exec('const fs = require("fs"); fs.symlinkSync("/etc", "/workspace/etc");' +
      ' fs.symlinkSync("/etc/hostname", "/workspace/host"); fs.mkdirSync("/workspace/d");' +
      ' fs.symlinkSync("/tmp", "/workspace/d/t")');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    for (const path of ['etc/hostname', 'host', 'd/t/x']) {
      const [f] = await download(path);
      assert.equal(f.type, 'file_error', path);
      assert.equal(f.code, 'invalid_argument', path);
    }
    const up = await upload('etc/evil', Buffer.from('x'));
    assert.equal(up.code, 'invalid_argument');
    const over = await upload('host', Buffer.from('replaced'));
    assert.equal(over.type, 'file_written', 'a symlink itself is replaced, never its target');
    const check = await client.exec('[fs.lstatSync("/workspace/host").isFile(), fs.readFileSync("/etc/hostname", "utf8").length > 0]');
    assert.equal(check.result, '[ true, true ]');
  });

  it('enforces max_bytes and reports missing files', async () => {
    const big = await upload('big', Buffer.alloc(100), { max: 10 });
    assert.deepEqual([big.type, big.code], ['file_error', 'resource_exhausted']);
    const [missing] = await download('nope');
    assert.equal(missing.code, 'not_found');
    const [dir] = await download('dir');
    assert.equal(dir.code, 'failed_precondition');
    const [capped] = await download('dir/sub/a.txt', 2);
    assert.equal(capped.code, 'resource_exhausted');
  });
});
