'use strict';
// Experiment 2: Pyodide in a worker thread; interrupts through setInterruptBuffer on a
// SharedArrayBuffer (CPU loops) and task cancellation (awaits); the namespace survives both.
// A loop that swallows BaseException is ended by worker.terminate() (the namespace is lost).
//   node --permission --allow-worker --allow-fs-read=... 02-interrupt.js SNAPSHOT_FILE
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const { loadFromSnapshot, ms, now } = require('./common');

const CELL_RUNNER = `
import asyncio
from pyodide.code import eval_code_async
NS = {'__name__': '__main__'}
_current = None
# KeyboardInterrupt (a BaseException) raised in a Task escapes the webloop's handle as an
# unhandled rejection, so the cell turns it into a result before it leaves the coroutine.
async def _cell(code):
    try:
        r = await eval_code_async(code, NS, filename='<cell>')
        return ['ok', None if r is None else repr(r)]
    except KeyboardInterrupt:
        return ['interrupted', 'KeyboardInterrupt']
    except asyncio.CancelledError:
        return ['interrupted', 'CancelledError']
    except Exception as e:
        return ['error', f'{type(e).__name__}: {e}']
def start(code):
    global _current
    _current = asyncio.ensure_future(_cell(code))
    return _current
def cancel():
    if _current is not None:
        _current.cancel()
# Tool calls: a future per call, the request posted to the main thread (which makes the
# tool_call frame), resolved when the main thread passes the tool_result back.
import itertools, json
from host_bridge import post_tool_call
_calls = {}
_ids = itertools.count(1)
async def call_tool(server, tool, arguments):
    call_id = f'c{next(_ids)}'
    fut = asyncio.get_event_loop().create_future()
    _calls[call_id] = fut
    post_tool_call(call_id, server, tool, json.dumps(arguments))
    return await fut
def resolve(call_id, result_json):
    fut = _calls.pop(call_id, None)
    if fut is not None and not fut.done():
        fut.set_result(json.loads(result_json))
NS['call_tool'] = call_tool
`;

async function workerMain() {
  const interrupt = new Int32Array(workerData.sab);
  const py = await loadFromSnapshot(workerData.snapshot);
  py.setInterruptBuffer(interrupt);
  py.registerJsModule('host_bridge', {
    post_tool_call: (callId, server, tool, args) => parentPort.postMessage(
      { type: 'tool_call', call_id: callId, server, tool, arguments: JSON.parse(args) }),
  });
  const host = py.runPython(`${CELL_RUNNER}\nimport sys; sys.modules[__name__]`);
  parentPort.on('message', async (m) => {
    if (m.type === 'cancel') { host.cancel(); return; }
    if (m.type === 'tool_result') { host.resolve(m.call_id, JSON.stringify(m.result)); return; }
    const r = await host.start(m.code);
    const [status, result] = r.toJs();
    r.destroy();
    parentPort.postMessage({ type: 'done', id: m.id, status, result });
  });
  parentPort.postMessage({ type: 'ready' });
}

// onToolCall(message): the worker's tool_call; answer with worker.postMessage(
// {type: 'tool_result', call_id, result}).
function startWorker(snapshot, onToolCall = () => {}) {
  const sab = new SharedArrayBuffer(4);
  const sabView = new Int32Array(sab);
  const t0 = now();
  const worker = new Worker(__filename, { workerData: { sab, snapshot } });
  const pending = new Map();
  let nextId = 1;
  const ready = new Promise((resolve, reject) => {
    worker.on('message', (m) => {
      if (m.type === 'ready') resolve(ms(t0));
      else if (m.type === 'tool_call') onToolCall(m);
      else if (m.type === 'done') {
        // An interrupt that arrives after its exec ended must not hit the next one.
        Atomics.store(sabView, 0, 0);
        pending.get(m.id)(m);
        pending.delete(m.id);
      }
    });
    worker.on('error', reject);
    worker.on('exit', (code) => reject(new Error(`worker exited with ${code}`)));
  });
  const run = (code) => new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    worker.postMessage({ type: 'exec', id, code });
  });
  return { worker, sab: sabView, ready, run };
}

const sleep = (n) => new Promise((r) => setTimeout(r, n));

// SIGINT (2) into the buffer, again every 50 ms until the exec is done: a write that lands
// before the loop starts, or in code that swallows it once, is not lost.
async function interruptUntilDone(w, done) {
  let finished = false;
  done.then(() => { finished = true; });
  while (!finished) {
    Atomics.store(w.sab, 0, 2);
    await Promise.race([done, sleep(50)]);
  }
  return done;
}

async function main() {
  const snapshot = process.argv[2];
  const w = startWorker(snapshot);
  const out = { node: process.version, worker_ready_ms: Math.round(await w.ready) };
  await w.run('x = 5');

  // CPU loop: write SIGINT (2) into the buffer, time until the exec is done.
  const cpu = [];
  for (let i = 0; i < 5; i++) {
    const p = w.run('while True: pass');
    await sleep(200);
    const t = now();
    const d = await interruptUntilDone(w, p);
    cpu.push(+ms(t).toFixed(2));
    if (d.status !== 'interrupted') throw new Error(`not interrupted: ${JSON.stringify(d)}`);
  }
  out.cpu_loop_interrupt_ms = cpu;
  out.x_after_cpu_interrupts = (await w.run('x')).result;

  // An await: cancel the cell's task from the worker's event loop.
  const aw = [];
  for (let i = 0; i < 5; i++) {
    const p = w.run('import asyncio\nawait asyncio.sleep(100)');
    await sleep(100);
    const t = now();
    w.worker.postMessage({ type: 'cancel' });
    const d = await p;
    aw.push(+ms(t).toFixed(2));
    if (d.status !== 'interrupted') throw new Error(`await not cancelled: ${JSON.stringify(d)}`);
  }
  out.await_cancel_ms = aw;
  out.x_after_cancel = (await w.run('x')).result;

  // A loop that swallows BaseException: the buffer cannot stop it; terminate the worker.
  const p = w.run('while True:\n  try:\n    while True: pass\n  except BaseException: pass');
  await sleep(200);
  Atomics.store(w.sab, 0, 2);
  const stillRunning = await Promise.race([p.then(() => false), sleep(300).then(() => true)]);
  out.swallowing_loop_survives_interrupt = stillRunning;
  const t = now();
  await w.worker.terminate();
  out.terminate_ms = +ms(t).toFixed(2);
  const t2 = now();
  const w2 = startWorker(snapshot);
  await w2.ready;
  out.replacement_worker_ready_ms = Math.round(ms(t2));
  out.x_in_replacement = (await w2.run('globals().get("x")')).result;
  console.log(JSON.stringify(out));
  await w2.worker.terminate();
}

module.exports = { startWorker };
if (isMainThread && require.main === module) main().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
else if (!isMainThread) workerMain().catch((e) => { require('fs').writeSync(2, `worker FAILED: ${e && e.stack}\n`); process.exit(1); });
