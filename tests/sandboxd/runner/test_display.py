"""Rich outputs: display(), the trailing expression and mcp.display follow IPython's
display protocol; bundles keep their place among prints, only known MIME types leave the
sandbox, binary data is base64, and the per-exec display cap drops what does not fit."""

import base64
import json
import os
import tempfile

from harness import RunnerTestCase

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))

RICH = (
    "class Rich:\n"
    "    def _repr_html_(self): return '<b>hi</b>'\n"
    "    def _repr_markdown_(self): return '**hi**'\n"
    "    def __repr__(self): return 'Rich()'\n")


class DisplayTest(RunnerTestCase):
    def test_display_keeps_its_place_among_prints(self):
        res = self.client.exec(RICH + "print('a')\ndisplay(Rich())\nprint('b')")
        self.assertOk(res)
        self.assertEqual(res.chunks, [
            ["stdout", "a\n"],
            ["display", {"text/html": "<b>hi</b>", "text/markdown": "**hi**",
                         "text/plain": "Rich()"}],
            ["stdout", "b\n"]])
        self.assertEqual(res.done["displays"], 1)
        self.assertEqual(res.done["displays_dropped"], 0)

    def test_png_bytes_travel_as_base64(self):
        res = self.client.exec(
            f"class P:\n    def _repr_png_(self): return {PNG!r}\n"
            "display(P())")
        self.assertOk(res)
        (bundle,) = res.displays
        self.assertEqual(base64.b64decode(bundle["image/png"]), PNG)
        self.assertIn("text/plain", bundle)

    def test_mimebundle_comes_first_and_unknown_types_are_dropped(self):
        res = self.client.exec(
            "class M:\n"
            "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
            "        return ({'text/html': '<i>m</i>', 'application/x-widget': 'w'}, {})\n"
            "    def _repr_html_(self): return 'not used'\n"
            "display(M())")
        self.assertOk(res)
        (bundle,) = res.displays
        self.assertEqual(bundle["text/html"], "<i>m</i>")
        self.assertNotIn("application/x-widget", bundle)

    def test_trailing_expression_with_rich_repr_is_displayed(self):
        res = self.client.exec(RICH + "Rich()")
        self.assertOk(res)
        self.assertEqual(res.result, "Rich()")
        self.assertEqual([d["text/html"] for d in res.displays], ["<b>hi</b>"])

    def test_plain_values_are_not_displayed(self):
        res = self.client.exec("x = {'a': 1}\nx")
        self.assertOk(res)
        self.assertEqual(res.value, {"a": 1})
        self.assertEqual(res.displays, [])
        res = self.client.exec("display({'a': 1})")
        self.assertEqual(res.displays, [{"text/plain": "{'a': 1}"}])

    def test_json_when_asked(self):
        res = self.client.exec("from mcp.display import JSON\n"
                               "display(JSON({'rows': [1, 2], 'ok': True}))")
        self.assertOk(res)
        (bundle,) = res.displays
        self.assertEqual(json.loads(bundle["application/json"]), {"rows": [1, 2], "ok": True})

    def test_json_nested_deeper_than_120_levels_is_not_sent(self):
        # sandboxd refuses display JSON deeper than 128 levels (and ends the session)
        res = self.client.exec("from mcp.display import JSON\n"
                               "v = 1\n"
                               "for _ in range(121): v = [v]\n"
                               "display(JSON(v))\n"
                               "display(JSON(v[0]))")
        self.assertOk(res)
        too_deep, fits = res.displays
        self.assertEqual(sorted(too_deep), ["text/plain"])
        self.assertEqual(json.loads(fits["application/json"]), json.loads("[" * 120 + "1" + "]" * 120))
        self.assertIn("application/json data not sent: nested deeper than 120 levels",
                      res.stream("stderr"))

    def test_json_sandboxd_could_not_read_is_not_sent(self):
        # An integer beyond a double's range, or more values than sandboxd's budget for
        # display JSON: sent, either would end the session.
        res = self.client.exec("from mcp.display import JSON\n"
                               "display(JSON({'x': 10**400}))\n"
                               "display({'application/json': [0] * ((1 << 20) + 1),\n"
                               "         'text/plain': 'many'}, raw=True)\n"
                               "display(JSON({'x': 10**300}))")
        self.assertOk(res)
        big, many, fits = res.displays
        self.assertEqual(sorted(big), ["text/plain"])
        self.assertEqual(sorted(many), ["text/plain"])
        self.assertEqual(json.loads(fits["application/json"]), {"x": 10**300})
        err = res.stream("stderr")
        self.assertIn("application/json data not sent: holds an integer of 401 digits", err)
        self.assertIn("application/json data not sent: holds more than 1048576 values", err)

    def test_raw_bundles_and_include_exclude(self):
        res = self.client.exec(
            "display({'text/markdown': '# t', 'text/plain': 't'}, raw=True)\n"
            + RICH + "display(Rich(), include={'text/html'})\n"
            "display(Rich(), exclude={'text/html', 'text/markdown'})")
        self.assertOk(res)
        self.assertEqual(res.displays, [{"text/markdown": "# t", "text/plain": "t"},
                                        {"text/html": "<b>hi</b>"},
                                        {"text/plain": "Rich()"}])
        res = self.client.exec("display('x', raw=True)")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "TypeError")

    def test_a_failing_repr_is_reported_and_skipped(self):
        res = self.client.exec(
            "class Bad:\n"
            "    def _repr_html_(self): raise ValueError('boom')\n"
            "    def __repr__(self): return 'Bad()'\n"
            "display(Bad())")
        self.assertOk(res)
        self.assertEqual(res.displays, [{"text/plain": "Bad()"}])
        self.assertIn("Bad._repr_html_() failed: ValueError: boom", res.stream("stderr"))

    def test_bad_binary_data_is_not_sent(self):
        res = self.client.exec(
            "display({'image/png': 'not base64!', 'image/jpeg': 42, 'text/plain': 'p'},"
            " raw=True)")
        self.assertOk(res)
        self.assertEqual(res.displays, [{"text/plain": "p"}])
        self.assertIn("image/png data is neither bytes nor base64", res.stream("stderr"))

    def test_cap_drops_with_a_marker_and_keeps_smaller_ones(self):
        res = self.client.exec(
            "display({'text/html': 'x' * 5000}, raw=True)\n"
            "display({'text/html': 'small'}, raw=True)",
            max_display_bytes=1000)
        self.assertOk(res)
        self.assertEqual(res.displays, [{"text/html": "small"}])
        self.assertEqual(res.done["displays"], 1)
        self.assertEqual(res.done["displays_dropped"], 1)
        self.assertIn("[display dropped: its 5017 bytes are over the 1000 bytes left",
                      res.stream("stderr"))

    def test_no_budget_means_no_displays(self):
        res = self.client.exec("display({'text/plain': 'x'}, raw=True)", max_display_bytes=0)
        self.assertOk(res)
        self.assertEqual(res.displays, [])
        self.assertEqual(res.done["displays_dropped"], 1)

    def test_image_helper_reads_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "chart.png")
            with open(path, "wb") as f:
                f.write(PNG)
            res = self.client.exec("from mcp.display import Image, HTML, Markdown\n"
                                   f"display(Image(filename={path!r}), HTML('<p>'),"
                                   " Markdown('*m*'))")
        self.assertOk(res)
        self.assertEqual(base64.b64decode(res.displays[0]["image/png"]), PNG)
        self.assertEqual(res.displays[1]["text/html"], "<p>")
        self.assertEqual(res.displays[2]["text/markdown"], "*m*")

    def test_display_survives_reset(self):
        self.client.reset()
        res = self.client.exec("import mcp\ndisplay == mcp.display.display")
        self.assertOk(res)
        self.assertEqual(res.result, "True")
