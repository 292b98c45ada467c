// The gateway's --isolation: a gateway configured for gVisor runs every run_python of its
// clients under gVisor's kernel on a sandboxd that allows it, while another gateway on the
// same sandboxd keeps sandboxd's default; a sandboxd that does not allow it says so. And
// --isolation=wasm: both tools on the wasm tier (no container), tool calls included.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Sandboxd, everythingStdio, runPython, stdioGateway, stopAll, text, writeConfig } from "./harness.mjs";

const RELEASE = "import os\nprint(os.uname().release)";

describe("gateway --isolation", () => {
  let both, containerOnly, config;
  const gateways = [];
  before(async () => {
    both = new Sandboxd(["--allowed_isolations=container,gvisor,wasm",
      `--wasm_dir=/tmp/sandboxd-test-wasm-${process.getuid()}`]);
    containerOnly = new Sandboxd();
    await Promise.all([both.start(), containerOnly.start()]);
    config = writeConfig({ everything: everythingStdio() });
  });
  after(async () => {
    for (const g of gateways) await g.client.close();
    await both?.stop();
    await containerOnly?.stop();
    await stopAll();
  });
  const gateway = async (sandboxd, extraArgs = []) => {
    const g = await stdioGateway({ config, sandboxd: sandboxd.endpoint, extraArgs });
    gateways.push(g);
    return g.client;
  };

  test("--isolation=gvisor runs under gVisor; the default gateway does not", async () => {
    const gvisor = await gateway(both, ["--isolation=gvisor"]);
    const plain = await gateway(both);
    const [g, p] = await Promise.all([runPython(gvisor, RELEASE), runPython(plain, RELEASE)]);
    assert.ok(!g.isError, text(g));
    assert.equal(text(g).trim(), "4.4.0", "gVisor's kernel reports release 4.4.0");
    assert.ok(!p.isError, text(p));
    assert.notEqual(text(p).trim(), "4.4.0");
    // Tool calls work from the gVisor session too.
    const echo = await runPython(gvisor, "r = await mcp_everything.echo(message='hi')\nprint(r)");
    assert.ok(!echo.isError, text(echo));
    assert.match(text(echo), /hi/);
  });

  test("a sandboxd that does not allow gVisor refuses with the reason", async () => {
    const client = await gateway(containerOnly, ["--isolation=gvisor"]);
    const r = await runPython(client, "print(1)");
    assert.equal(r.isError, true);
    assert.match(text(r), /gvisor/i);
    assert.match(text(r), /allow/i);
  });

  test("--isolation=wasm runs run_python and run_javascript on the wasm tier", async () => {
    const wasm = await gateway(both, ["--isolation=wasm"]);
    const py = await runPython(wasm,
      "import sys\nr = await mcp_everything.echo(message='hi')\nprint(sys.platform, r)");
    assert.ok(!py.isError, text(py));
    assert.match(text(py), /^emscripten .*hi/m, "Python runs in Pyodide and calls tools");
    const js = await wasm.callTool({ name: "run_javascript", arguments: {
      code: "const r = await mcp_everything.echo({message: 'yo'}); console.log(typeof Deno, JSON.stringify(r))" } },
      undefined, { timeout: 120000 });
    assert.ok(!js.isError, text(js));
    assert.match(text(js), /yo/);
  });
});
