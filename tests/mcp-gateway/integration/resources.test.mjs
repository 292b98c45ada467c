// Produced files as MCP resources, seen by TypeScript SDK clients of one HTTP gateway on
// sandboxd's data image: code that saves a matplotlib chart and a CSV under
// /workspace/out/ gets resource_link blocks back, and the client reads both with
// resources/read, byte for byte (sha256 computed inside the sandbox); resources/list,
// the template and list_changed follow. A second client of the same gateway can read
// none of it, whatever URI it sends; hostile URIs, symlinks out of the workspace and
// oversized files get clear errors.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import {
  GatewayHttp, Sandboxd, everythingStdio, runPython, sdkTypes, stdioGateway, stopAll, text, waitFor, writeConfig,
} from "./harness.mjs";

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const RESOURCE_NOT_FOUND = -32002;
const INVALID_PARAMS = -32602;
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

// The JSON-RPC error code of a rejected request.
async function errorCode(promise) {
  try {
    await promise;
  } catch (e) {
    return e.code;
  }
  assert.fail("the request succeeded");
}

describe("produced files as resources", () => {
  let sandboxd, config, gateway, alice, bob;
  let aliceChanged = 0;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    config = writeConfig({ everything: everythingStdio() });
    gateway = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, extraArgs: ["--image=data"] });
    await gateway.start();
    alice = await gateway.client("alice");
    bob = await gateway.client("bob");
    alice.setNotificationHandler(sdkTypes.ResourceListChangedNotificationSchema, () => { aliceChanged++; });
  });
  after(async () => {
    await alice?.close();
    await bob?.close();
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  let chartUri, csvUri, chartSha;
  test("a chart and a CSV saved under out/ come back as links the client reads", async () => {
    const r = await runPython(alice, [
      "import hashlib, os, matplotlib.pyplot as plt",
      "os.makedirs('out/report', exist_ok=True)",
      "plt.plot([1, 2, 3], [5, 9, 4]); plt.title('sales')",
      "plt.savefig('out/report/chart.png'); plt.close('all')",
      "open('out/report/sales.csv', 'w').write('day,sales\\n1,5\\n2,9\\n3,4\\n')",
      "print('sha', hashlib.sha256(open('out/report/chart.png', 'rb').read()).hexdigest())",
    ].join("\n"));
    assert.ok(!r.isError, text(r));
    const links = r.content.filter((c) => c.type === "resource_link");
    assert.deepEqual(links.map((l) => l.uri), [
      "sandbox://session/default/out/report/chart.png",
      "sandbox://session/default/out/report/sales.csv",
    ]);
    assert.equal(links[0].mimeType, "image/png");
    assert.equal(links[1].mimeType, "text/csv");
    assert.equal(links[1].size, 22);
    assert.deepEqual(r.structuredContent.files.map((f) => f.path),
      ["/workspace/out/report/chart.png", "/workspace/out/report/sales.csv"]);
    assert.match(text(r), /2 file\(s\) created or changed/);
    [chartUri, csvUri] = links.map((l) => l.uri);
    chartSha = /sha ([0-9a-f]{64})/.exec(text(r))[1];

    const chart = await alice.readResource({ uri: chartUri });
    assert.equal(chart.contents.length, 1);
    assert.equal(chart.contents[0].mimeType, "image/png");
    const png = Buffer.from(chart.contents[0].blob, "base64");
    assert.ok(png.subarray(0, 8).equals(PNG_MAGIC), "a real PNG");
    assert.equal(sha256(png), chartSha, "the same bytes the code wrote");
    const csv = await alice.readResource({ uri: csvUri });
    assert.equal(csv.contents[0].text, "day,sales\n1,5\n2,9\n3,4\n");
    await waitFor(() => aliceChanged > 0, "notifications/resources/list_changed", 5000);
  });

  test("resources/list and the template name the caller's files", async () => {
    const { resources } = await alice.listResources();
    assert.deepEqual(resources.map((x) => x.uri), [chartUri, csvUri]);
    assert.ok(resources[0].size > 1000);
    assert.match(resources[0].annotations.lastModified, /^\d{4}-\d\d-\d\dT/);
    const { resourceTemplates } = await alice.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate),
      ["sandbox://session/default/out/{+path}", "sandbox://handle/{sandbox}/out/{+path}"]);
    // A run that changes nothing under out/ links nothing.
    const again = await runPython(alice, "print('unchanged')");
    assert.equal(again.content.filter((c) => c.type === "resource_link").length, 0, "nothing new");
  });

  test("another client of the same gateway can read none of it", async () => {
    assert.equal(await errorCode(bob.readResource({ uri: chartUri })), RESOURCE_NOT_FOUND);
    assert.deepEqual((await bob.listResources()).resources, []);
    // With a session of the same name, the URI names bob's own workspace.
    const r = await runPython(bob, "import os; os.makedirs('out', exist_ok=True); open('out/mine.txt', 'w').write('bob')");
    assert.ok(!r.isError, text(r));
    assert.equal(await errorCode(bob.readResource({ uri: chartUri })), RESOURCE_NOT_FOUND);
    assert.deepEqual((await bob.listResources()).resources.map((x) => x.name), ["mine.txt"]);
    assert.equal((await bob.readResource({ uri: "sandbox://session/default/out/mine.txt" })).contents[0].text, "bob");
    assert.equal(await errorCode(alice.readResource({ uri: "sandbox://session/default/out/mine.txt" })),
      RESOURCE_NOT_FOUND);
  });

  test("hostile URIs and escapes get clear errors", async () => {
    const r = await runPython(alice, [
      "import os",
      "os.makedirs('in', exist_ok=True); open('in/secret.txt', 'w').write('not out')",
      "os.symlink('/etc/passwd', 'out/passwd')",
      "os.symlink('../../etc', 'out/etc')",
    ].join("\n"));
    assert.ok(!r.isError, text(r));
    for (const uri of [
      "sandbox://session/default/out/../in/secret.txt",
      "sandbox://session/default/out/%2e%2e/in/secret.txt",
      "sandbox://session/default/in/secret.txt",
      "file:///etc/passwd",
      "sandbox://session/default/out/a%00b",
    ]) {
      assert.equal(await errorCode(alice.readResource({ uri })), INVALID_PARAMS, uri);
    }
    // Symlinks out of the workspace: sandboxd refuses to follow them.
    for (const uri of ["sandbox://session/default/out/passwd", "sandbox://session/default/out/etc/passwd"]) {
      const code = await errorCode(alice.readResource({ uri }));
      assert.ok(code === INVALID_PARAMS || code === RESOURCE_NOT_FOUND, `${uri}: ${code}`);
    }
    // Symlinks are not produced files.
    const { resources } = await alice.listResources();
    assert.ok(!resources.some((x) => /passwd|etc/.test(x.uri)), JSON.stringify(resources));
  });

  test("a file over --max_resource_bytes is an error that says to use code", async () => {
    const { client } = await stdioGateway({ config, sandboxd: sandboxd.endpoint,
      extraArgs: ["--max_resource_bytes=1000"] });
    try {
      const r = await runPython(client, "import os; os.makedirs('out', exist_ok=True); open('out/big.txt', 'w').write('x' * 5000)");
      const link = r.content.find((c) => c.type === "resource_link");
      assert.equal(link.size, 5000);
      await assert.rejects(client.readResource({ uri: link.uri }), /larger than the 1000 bytes.*from code/);
    } finally {
      await client.close();
    }
  });
});
