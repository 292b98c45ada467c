// Prints one JSON line per function of the JavaScript files given as arguments: {path,
// name, line, end}. Used by scripts/shape.py; parses with acorn (deploy/node/node_modules).
// The callback of a node:test describe() is a container of tests, like a test class, not a
// function: it is left out, and the tests in it are measured.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'deploy', 'node', 'package.json'));
const acorn = require('acorn');
const walk = require('acorn-walk');

for (const file of process.argv.slice(2)) {
  const source = readFileSync(file, 'utf8').replace(/^#!.*/, '');
  const ast = acorn.parse(source, { ecmaVersion: 'latest', sourceType: 'module', locations: true });
  const report = (node, name) => {
    console.log(JSON.stringify({ path: file, name, line: node.loc.start.line, end: node.loc.end.line }));
  };
  const containers = new Set();
  walk.simple(ast, {
    CallExpression(node) {
      if (node.callee.type === 'Identifier' && node.callee.name === 'describe') {
        for (const arg of node.arguments) containers.add(arg);
      }
    },
  });
  walk.full(ast, (node) => {
    if (containers.has(node)) return;
    if (node.type === 'FunctionDeclaration') report(node, node.id.name);
    if (node.type === 'FunctionExpression' || node.type === 'ArrowFunctionExpression') {
      report(node, node.id?.name ?? `(anonymous at line ${node.loc.start.line})`);
    }
  });
}
