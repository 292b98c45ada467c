// Rich results through the gateway, seen by the TypeScript SDK client: a gateway on
// sandboxd's data image (--image=data) returns a matplotlib chart as an MCP image block
// (a real PNG) and a DataFrame as an HTML text block, with structuredContent listing both;
// on the default image display() works and a missing library is a plain Python error; a
// gateway naming an image sandboxd does not offer gets the reason; run_python's `files`
// reach the workspace byte for byte before the code runs.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Sandboxd, everythingStdio, runPython, stdioGateway, stopAll, text, writeConfig } from "./harness.mjs";

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("rich results", () => {
  let sandboxd, config;
  const gateways = [];
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    config = writeConfig({ everything: everythingStdio() });
  });
  after(async () => {
    for (const g of gateways) await g.client.close();
    await sandboxd?.stop();
    await stopAll();
  });
  const gateway = async (extraArgs = []) => {
    const g = await stdioGateway({ config, sandboxd: sandboxd.endpoint, extraArgs });
    gateways.push(g);
    return g.client;
  };

  test("a chart is an image block and a DataFrame an HTML block", async () => {
    const client = await gateway(["--image=data"]);
    const r = await runPython(client, [
      "import matplotlib.pyplot as plt, pandas as pd",
      "df = pd.DataFrame({'day': [1, 2, 3], 'sales': [5, 9, 4]})",
      "df.plot(x='day', y='sales', title='sales')",
      "plt.show()",
      "print('rows', len(df))",
      "df",
    ].join("\n"));
    assert.ok(!r.isError, text(r));
    assert.match(r.content[0].text, /rows 3/);
    const images = r.content.filter((c) => c.type === "image");
    assert.equal(images.length, 1, JSON.stringify(r.structuredContent));
    assert.equal(images[0].mimeType, "image/png");
    const png = Buffer.from(images[0].data, "base64");
    assert.ok(png.subarray(0, 8).equals(PNG_MAGIC), "a real PNG");
    assert.ok(png.length > 2000, `a chart, not a stub (${png.length} bytes)`);
    // The image comes first (plt.show()), then the DataFrame, as HTML.
    assert.equal(r.content[1].type, "image");
    assert.equal(r.content[2].type, "text");
    assert.match(r.content[2].text, /<table[\s\S]*<td>9<\/td>/);
    const displays = r.structuredContent.displays;
    assert.deepEqual(displays.map((d) => d.shown_as), ["image/png", "text/html"]);
    assert.ok(displays[1].mime_types.includes("text/plain"));
    assert.equal(r.structuredContent.displays_dropped, 0);
  });

  test("the default image displays too, and lacks the data libraries", async () => {
    const client = await gateway();
    const shown = await runPython(client, "from mcp.display import Markdown\ndisplay(Markdown('**done**'))");
    assert.ok(!shown.isError, text(shown));
    assert.equal(shown.content[1].text, "**done**");
    const missing = await runPython(client, "import matplotlib");
    assert.equal(missing.isError, true);
    assert.match(text(missing), /ModuleNotFoundError/);
  });

  test("files are written before the code runs, byte for byte; escapes are refused", async () => {
    const client = await gateway();
    const blob = Buffer.from([0, 255, 1, 2, 254, 10, 13]);
    const r = await runPython(client, [
      "import hashlib",
      "print(open('data/in.csv').read().strip())",
      "print(hashlib.sha256(open('blob.bin', 'rb').read()).hexdigest())",
    ].join("\n"), { files: { "data/in.csv": "city,temp\nOslo,3\n", "blob.bin": { base64: blob.toString("base64") } } });
    assert.ok(!r.isError, text(r));
    assert.match(text(r), /city,temp\nOslo,3/);
    assert.match(text(r), new RegExp(createHash("sha256").update(blob).digest("hex")));
    const bad = await runPython(client, "print('ran')", { files: { "../escape.txt": "x" } });
    assert.equal(bad.isError, true);
    assert.match(text(bad), /files\['\.\.\/escape\.txt'\]: .*'\.\.' is not allowed/);
    assert.doesNotMatch(text(bad), /ran/);
  });

  test("a long stdout is kept in the workspace and the model gets its head, tail and path", async () => {
    const client = await gateway();
    const r = await runPython(client, "for i in range(20000):\n    print(f'row {i:05d}')");
    assert.ok(!r.isError, text(r));
    const file = r.structuredContent.stdout_file;
    assert.match(file, /^\/workspace\/out\/run_python\/stdout-\d+\.txt$/);
    assert.ok(r.structuredContent.stdout.length < 40000, "the context gets a clipped stdout");
    assert.match(text(r), /row 19999/);
    assert.match(text(r), new RegExp(`all of it is in ${file}`));
    const back = await runPython(client, `lines = open('${file}').read().splitlines()\nprint(len(lines), lines[12345])`);
    assert.equal(text(back).trim(), "20000 row 12345");
  });

  test("an image sandboxd does not offer is refused with the reason", async () => {
    const client = await gateway(["--image=nonesuch"]);
    const r = await runPython(client, "print(1)");
    assert.equal(r.isError, true);
    assert.match(text(r), /not offered/);
    assert.match(text(r), /default, data/);
  });
});
