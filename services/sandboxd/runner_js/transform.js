'use strict';
// The REPL transform of one cell (the idea of Node's lib/internal/repl/await.js): the cell
// becomes the body of an async arrow function, so top-level `await` works, and
//  - top-level `let`/`const`/`class` and every `var` outside functions become assignments to
//    global variables declared with `var` in front of the wrapper, so the next cell sees
//    them and may declare them again (notebook users re-run cells; `const` is not enforced
//    across cells);
//  - top-level function declarations stay in place (hoisted inside the cell as before) and
//    are copied to the global object at the start of the body;
//  - a trailing expression statement becomes `return {__proto__: null, value: (expr)}` (the
//    cell's result; the box keeps a returned promise from being awaited, and has no `then`
//    even when user code put one on Object.prototype).
// It runs on the main thread, whose globals user code cannot reach.
// Everything the transform adds to the first line goes before the code, and nothing adds
// lines, so line numbers in stacks are the cell's own. The script evaluates to the async
// function; the runner calls it (so no frame of the wrapper's call shows in stacks).

const path = require('path');

// acorn: the system's (Debian's, in the sandbox image), or on the wasm tier's Node
// (<runtime>/node/bin/node, whose module path has no /usr/share/nodejs) the one installed
// beside it in <runtime> (deploy/wasm/package.json).
function loadAcorn() {
  try {
    return require('acorn');
  } catch (e) {
    try {
      return require(path.join(path.dirname(process.execPath), '..', '..', 'acorn'));
    } catch (ignored) {
      throw e;
    }
  }
}

const acorn = loadAcorn();

const PARSE_OPTIONS = {
  ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true,
  locations: false,
};

// Names bound by a declaration pattern (identifiers, destructuring, defaults, rest).
function patternNames(node, out) {
  if (!node) return out;
  switch (node.type) {
    case 'Identifier': out.push(node.name); break;
    case 'ObjectPattern':
      for (const p of node.properties) patternNames(p.type === 'RestElement' ? p.argument : p.value, out);
      break;
    case 'ArrayPattern': for (const e of node.elements) patternNames(e, out); break;
    case 'AssignmentPattern': patternNames(node.left, out); break;
    case 'RestElement': patternNames(node.argument, out); break;
    default: break;
  }
  return out;
}

class CellTransform {
  constructor(source) {
    this.source = source;
    this.globals = new Set();     // names declared with `var` before the wrapper
    this.functions = [];          // top-level function declarations
    this.edits = [];              // {start, end, text}, non-overlapping
  }

  slice(node) {
    return this.source.slice(node.start, node.end);
  }

  // A declaration rewritten as assignments. `inFor`: the init or left side of a loop head.
  declaration(node, inFor, forLeft) {
    const parts = [];
    for (const d of node.declarations) {
      patternNames(d.id, []).forEach((n) => this.globals.add(n));
      if (forLeft) parts.push(this.slice(d.id));
      else if (d.init) parts.push(`(${this.slice(d.id)}) = (${this.slice(d.init)})`
        .replace(/^\((\{[\s\S]*\}|\[[\s\S]*\])\) = /, '$1 = '));
      else if (node.kind !== 'var') parts.push(`${this.slice(d.id)} = undefined`);
    }
    let text;
    if (forLeft) text = parts[0];
    else if (inFor) text = parts.length ? parts.join(', ') : '';
    else text = parts.length ? `void (${parts.join(', ')});` : ';';
    this.edits.push({ start: node.start, end: node.end, text });
  }

  // `var` declarations anywhere outside functions (statements only: a var cannot appear in
  // an expression outside a function body).
  statement(node, top) {
    if (!node) return;
    switch (node.type) {
      case 'VariableDeclaration':
        if (top || node.kind === 'var') this.declaration(node, false, false);
        break;
      case 'ClassDeclaration':
        if (!top) break;
        this.globals.add(node.id.name);
        this.edits.push({ start: node.start, end: node.end,
          text: `void (${node.id.name} = ${this.slice(node)});` });
        break;
      case 'FunctionDeclaration':
        if (top) this.functions.push(node.id.name);
        break;
      case 'BlockStatement': case 'StaticBlock':
        node.body.forEach((s) => this.statement(s, false)); break;
      case 'IfStatement':
        this.statement(node.consequent, false); this.statement(node.alternate, false); break;
      case 'ForStatement':
        if (node.init && node.init.type === 'VariableDeclaration' && node.init.kind === 'var') {
          this.declaration(node.init, true, false);
        }
        this.statement(node.body, false); break;
      case 'ForInStatement': case 'ForOfStatement':
        if (node.left.type === 'VariableDeclaration' && node.left.kind === 'var') {
          this.declaration(node.left, true, true);
        }
        this.statement(node.body, false); break;
      case 'WhileStatement': case 'DoWhileStatement': case 'LabeledStatement':
      case 'WithStatement':
        this.statement(node.body, false); break;
      case 'TryStatement':
        this.statement(node.block, false);
        if (node.handler) this.statement(node.handler.body, false);
        this.statement(node.finalizer, false); break;
      case 'SwitchStatement':
        node.cases.forEach((c) => c.consequent.forEach((s) => this.statement(s, false))); break;
      default: break;
    }
  }

  build(program) {
    program.body.forEach((s) => this.statement(s, true));
    const last = program.body[program.body.length - 1];
    if (last && last.type === 'ExpressionStatement') {
      this.edits.push({ start: last.start, end: last.end,
        text: `return {__proto__: null, value: (${this.slice(last.expression)})};` });
    }
    this.edits.sort((a, b) => b.start - a.start);
    let code = this.source;
    for (const e of this.edits) code = code.slice(0, e.start) + e.text + code.slice(e.end);
    const names = [...this.globals, ...this.functions];
    const head = names.length ? `var ${names.join(', ')}; ` : '';
    const copies = this.functions.map((n) => `globalThis.${n} = ${n}; `).join('');
    return `${head}(async () => {${copies}${code}\n})`;
  }
}

// The script to run for a cell; throws acorn's SyntaxError (with .pos and .loc) when the
// cell does not parse. A hashbang first line (`#!/usr/bin/env node`), which node accepts at
// the start of a script, becomes a `//` comment of the same length: inside the wrapper it is
// no longer the start of the script, and the same length keeps every position and line.
function transformCell(source) {
  const text = source.startsWith('#!') ? `//${source.slice(2)}` : source;
  const program = acorn.parse(text, PARSE_OPTIONS);
  return new CellTransform(text).build(program);
}

// {type, message, traceback} of acorn's SyntaxError for the cell `source` named `filename`.
function syntaxErrorReport(err, source, filename) {
  const loc = err.loc || { line: 1, column: 0 };
  const line = (source.split('\n')[loc.line - 1] || '').slice(0, 1000);
  return { type: 'SyntaxError', message: err.message,
    traceback: `${filename}:${loc.line}\n${line}\n${' '.repeat(Math.min(loc.column, 1000))}^\n\n` +
      `SyntaxError: ${err.message}` };
}

// {type, message, traceback} of anything else the transform threw: acorn and the walk above
// recurse, so code nested about a thousand levels deep (a deep JSON literal, say) overflows
// the main thread's stack, which is this exec's error and nothing more.
function transformErrorReport(err, source, filename) {
  if (err instanceof SyntaxError) return syntaxErrorReport(err, source, filename);
  const type = (err && typeof err.name === 'string' && err.name) || 'Error';
  const raw = err && typeof err.message === 'string' ? err.message : String(err);
  const message = err instanceof RangeError && /call stack/i.test(raw) ?
    `the code is nested too deeply to parse (${raw})` : `the code could not be parsed: ${raw}`;
  return { type, message, traceback: `${filename}\n\n${type}: ${message}` };
}

module.exports = { transformCell, transformErrorReport };
