'use strict';
// An idle session's memory in the tier's layout: Pyodide restored in a worker, `x = 1` run,
// one second idle; prints VmRSS (anonymous and file-backed) and the thread count.
//   node idle-rss.js SNAPSHOT_FILE
const fs = require('fs');
const { startWorker } = require('./02-interrupt');

(async () => {
  const w = startWorker(process.argv[2]);
  await w.ready;
  await w.run('x = 1');
  await new Promise((r) => setTimeout(r, 1000));
  const status = fs.readFileSync('/proc/self/status', 'utf8').split('\n')
    .filter((l) => /^(VmRSS|RssAnon|RssFile|Threads)/.test(l)).join(' ').replace(/\s+/g, ' ');
  console.log(JSON.stringify({ node: process.version, status }));
  process.exit(0);
})().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
