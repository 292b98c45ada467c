'use strict';
// The files a Python (Pyodide) session starts from, and loading Pyodide from them: the
// Pyodide distribution (--pyodide DIR), the runner's Python package (--python-runner, the
// sandbox_runner.pyz zipapp) and the memory snapshot (--snapshot FILE, with its SHA-256 in
// FILE.sha256, made by --make-snapshot). Used by the main thread (checks, snapshot making)
// and by worker_python.js (loading).

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { log } = require('./common');

// Where the runner's package lives inside Pyodide's file system (MEMFS).
const PYZ_IN_PYODIDE = '/sandbox/sandbox_runner.pyz';
// Where --python-packages DIR's two directories appear (NODEFS): Debian's paths, which its
// requests and pip name (certifi.where() is the bundle in /etc/ssl/certs).
const PACKAGES_IN_PYODIDE = [['dist-packages', '/usr/lib/python3/dist-packages'], ['certs', '/etc/ssl/certs']];
// The package attribute a snapshot keeps the SHA-256 of the .pyz it was made from in.
const PYZ_MARK = "'SNAPSHOT_PYZ_SHA256'";
// Exit code of a snapshot that does not match its SHA-256 (before `ready`).
const SNAPSHOT_REFUSED_EXIT = 3;

class SnapshotRefused extends Error {}

// Under --permission process.binding() is denied, and Pyodide's NODEFS reads its O_* flags
// from process.binding('constants').fs when it starts: answer that one question from
// fs.constants (per thread: each worker has its own `process`).
function shimProcessBinding() {
  const realBinding = process.binding;
  if (realBinding.sandboxShim) return;
  const shim = function binding(name) {
    if (name === 'constants') return { fs: fs.constants, os: require('os').constants };
    return realBinding.call(process, name);
  };
  shim.sandboxShim = true;
  process.binding = shim;
}

function sha256(bytes) {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

function checkDigest(file, got) {
  const want = fs.readFileSync(`${file}.sha256`, 'utf8').trim();
  if (got !== want) throw new SnapshotRefused(`snapshot ${file} refused: sha256 ${got} != ${want}`);
}

// The snapshot's bytes, checked against FILE.sha256; SnapshotRefused on a mismatch.
function readSnapshot(file) {
  const bytes = fs.readFileSync(file);
  checkDigest(file, sha256(bytes));
  return bytes;
}

// The same check without holding the file in memory (the main thread's, at start: the
// worker checks the bytes it loads again).
function checkSnapshot(file) {
  const hash = crypto.createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  const fd = fs.openSync(file, 'r');
  try {
    for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) hash.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  checkDigest(file, hash.digest('hex'));
}

// The Python version the distribution's lock file names (`info.python`), for a `ready`
// sent before the first worker is; '' when it names none (the worker's `ready` tells).
function distributionVersion(dir) {
  try {
    const info = JSON.parse(fs.readFileSync(path.join(dir, 'pyodide-lock.json'), 'utf8')).info;
    return info && typeof info.python === 'string' && /^\d+\.\d+\.\d+$/.test(info.python) ? info.python : '';
  } catch (e) {
    return '';
  }
}

// The main thread's view of --language python: the options the worker needs, after the
// snapshot is checked (a mismatch ends the runner with exit 3, before any `ready`).
function pythonFiles(options) {
  if (options.snapshot) {
    try {
      checkSnapshot(options.snapshot);
    } catch (e) {
      process.stderr.write(`${e.message}\n`);
      process.exit(e instanceof SnapshotRefused ? SNAPSHOT_REFUSED_EXIT : 1);
    }
  }
  return { pyodide: path.resolve(options.pyodide), pythonRunner: path.resolve(options.pythonRunner),
    version: distributionVersion(options.pyodide),
    snapshot: options.snapshot ? path.resolve(options.snapshot) : null,
    workspace: path.resolve(options.workspace),
    pythonPackages: options.pythonPackages ? path.resolve(options.pythonPackages) : null };
}

// What Python's `js` module shows: nothing, until egress is on (exposeFetchToPython).
const pythonJsGlobals = {};

// Python's `js` gets what pyodide.http.pyfetch takes from it (the worker's fetch(), which goes
// through the egress relay, AbortController, AbortSignal, Object, Request), and a
// pyfetch imported before (the snapshot's, a cell's) is imported again to see them.
function exposeFetchToPython(py) {
  for (const name of ['fetch', 'AbortController', 'AbortSignal', 'Object', 'Request']) {
    pythonJsGlobals[name] = globalThis[name];
  }
  py.runPython('import importlib, sys\n' +
    "if 'pyodide.http._pyfetch' in sys.modules: importlib.reload(sys.modules['pyodide.http._pyfetch'])\n");
}

// Pyodide loaded from `files` (from the snapshot when there is one), with no JavaScript
// globals visible to Python (`import js` is an empty module), stdin at EOF and its own
// stdout/stderr (what Python writes before the runner's streams are in place) in the log.
// The runner's package is put back into MEMFS: a snapshot holds the modules imported when
// it was made, not the file system. Those modules are the code that runs, so a snapshot
// made from another sandbox_runner.pyz is refused (SnapshotRefused) rather than run old code.
async function loadPython(files, extra = {}) {
  shimProcessBinding();
  const { loadPyodide } = require(path.join(files.pyodide, 'pyodide.js'));
  const snapshot = files.snapshot ? { _loadSnapshot: readSnapshot(files.snapshot) } : {};
  const py = await loadPyodide({ indexURL: files.pyodide + path.sep, jsglobals: pythonJsGlobals,
    stdin: () => null, stdout: (s) => log(`python: ${s}`), stderr: (s) => log(`python: ${s}`),
    ...snapshot, ...extra });
  // The restore has copied the snapshot into the wasm Memory, but Pyodide's config keeps the
  // bytes (as large as that Memory) for the session's life: detached, they are freed now.
  // Its module keeps the function that instantiated the wasm binary, and with it the
  // binary's bytes (9.6 MB; V8 has its own copy): dropped, they go at the next collection.
  if (snapshot._loadSnapshot) snapshot._loadSnapshot.buffer.transfer(0);
  py._module.instantiateWasm = undefined;
  const pyz = fs.readFileSync(files.pythonRunner);
  if (files.snapshot) {
    const made = py.runPython(`import sandbox_runner\ngetattr(sandbox_runner, ${PYZ_MARK}, '')`);
    if (made !== sha256(pyz)) {
      throw new SnapshotRefused(`snapshot ${files.snapshot} refused: made from a ` +
        `sandbox_runner.pyz with sha256 ${made || '(none)'}, ${files.pythonRunner} has ${sha256(pyz)}`);
    }
  }
  py.FS.mkdirTree(path.dirname(PYZ_IN_PYODIDE));
  py.FS.writeFile(PYZ_IN_PYODIDE, pyz);
  py.runPython(`import sys\nif ${JSON.stringify(PYZ_IN_PYODIDE)} not in sys.path: ` +
    `sys.path.insert(0, ${JSON.stringify(PYZ_IN_PYODIDE)})`);
  return py;
}

// The packages of --python-packages (requests, pip) mounted and last on sys.path, after the
// standard library, which they cannot shadow. Nothing is read before an import: a session
// that imports none of them pays no memory for them. The session's process may only read
// there (Node's permission model, Landlock), so a write fails as on a read-only mount.
function mountPythonPackages(py, dir) {
  if (!dir) return;
  for (const [from, to] of PACKAGES_IN_PYODIDE) {
    const root = path.join(dir, from);
    let stat;
    try {
      stat = fs.statSync(root);
    } catch (e) {
      throw new Error(`--python-packages: ${root} cannot be read (${e.code || e.message}); ` +
        'scripts/wasm-python-packages.sh makes it');
    }
    if (!stat.isDirectory()) throw new Error(`--python-packages: ${root} is not a directory`);
    py.FS.mkdirTree(to);
    py.FS.mount(py.FS.filesystems.NODEFS, { root }, to);
  }
  const site = JSON.stringify(PACKAGES_IN_PYODIDE[0][1]);
  py.runPython(`import sys\nif ${site} not in sys.path: sys.path.append(${site})`);
}

// --make-snapshot OUT: cold Pyodide, the runner's package imported, the memory snapshot
// written to OUT, then its SHA-256 to OUT.sha256 (a snapshot cut short by a crash does not
// match, so it is refused).
async function makeSnapshot(options) {
  const files = { pyodide: path.resolve(options.pyodide),
    pythonRunner: path.resolve(options.pythonRunner), snapshot: null };
  const py = await loadPython(files, { _makeSnapshot: true });
  const pyz = sha256(fs.readFileSync(files.pythonRunner));
  py.runPython(`import sandbox_runner, sandbox_runner.pyodide_host\n` +
    `setattr(sandbox_runner, ${PYZ_MARK}, '${pyz}')`);
  const bytes = py.makeMemorySnapshot();
  const out = options.makeSnapshot;
  try {
    fs.unlinkSync(`${out}.sha256`);
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  fs.writeFileSync(out, bytes);
  fs.writeFileSync(`${out}.sha256`, `${sha256(bytes)}\n`);
}

module.exports = {
  pythonFiles, loadPython, mountPythonPackages, exposeFetchToPython, makeSnapshot, readSnapshot, SnapshotRefused,
  PYZ_IN_PYODIDE, SNAPSHOT_REFUSED_EXIT };
