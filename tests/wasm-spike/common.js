'use strict';
// Shared by the experiments: where Pyodide is, timing, and loading it cold or from a snapshot.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

// Under --permission process.binding() is denied, and Pyodide's NODEFS reads its O_* flags
// from process.binding('constants').fs at start: answer that one question from fs.constants.
const realBinding = process.binding;
process.binding = function binding(name) {
  if (name === 'constants') return { fs: fs.constants, os: require('os').constants };
  return realBinding.call(process, name);
};

const PYODIDE_DIR = path.join(__dirname, 'node_modules', 'pyodide');
const { loadPyodide } = require(path.join(PYODIDE_DIR, 'pyodide.js'));

function ms(t0) {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function now() {
  return process.hrtime.bigint();
}

const quiet = { stdout: () => {}, stderr: (s) => process.stderr.write(`[py] ${s}\n`) };

// Cold: the interpreter and stdlib from node_modules, nothing from the network.
async function loadCold(extra = {}) {
  return loadPyodide({ indexURL: PYODIDE_DIR + path.sep, ...quiet, ...extra });
}

// The snapshot file and its SHA-256 next to it (<file>.sha256); a mismatch is refused.
function readSnapshot(file) {
  const bytes = fs.readFileSync(file);
  const want = fs.readFileSync(`${file}.sha256`, 'utf8').trim();
  const got = crypto.createHash('sha256').update(bytes).digest('hex');
  if (got !== want) throw new Error(`snapshot ${file} refused: sha256 ${got} != ${want}`);
  return bytes;
}

async function loadFromSnapshot(file, extra = {}) {
  const bytes = readSnapshot(file);
  return loadPyodide({ indexURL: PYODIDE_DIR + path.sep, _loadSnapshot: bytes, ...quiet, ...extra });
}

module.exports = { PYODIDE_DIR, loadPyodide, loadCold, loadFromSnapshot, readSnapshot, ms, now };
