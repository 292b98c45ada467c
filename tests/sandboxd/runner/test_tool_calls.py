"""Tool calls: argument checks before any frame is sent, `tool_call` frames and how
`tool_result`s come back to user code, concurrency and the in-flight limit, call_tool(),
and calls outside an exec."""

import socket
import time
import unittest

from harness import MIB, CatalogTestCase, text_result


class ToolCallTest(CatalogTestCase):
    def test_bad_arguments_raise_type_error_without_rpc(self):
        cases = [
            "mcp_everything.echo()",                              # missing
            "mcp_everything.echo(message='a', extra=1)",           # unknown
            "mcp_everything.echo('a', 'b')",                      # too many
            "mcp_everything.echo(message=5)",                     # wrong type
            "mcp_everything.add(a=True, b=1)",                    # bool is not a number
            "mcp_everything.search(query='q', limit=1.5)",        # not an integer
            "mcp_everything.search(query='q', tags='x')",         # not an array
            "mcp_everything.echo(message=object())",              # wrong type
            "call_tool('everything', 'echo', {'message': 1})",    # generic path too
        ]
        for code in cases:
            with self.subTest(code=code):
                res = self.client.exec(f"await {code}")
                self.assertEqual(res.status, "error")
                self.assertEqual(res.error["type"], "TypeError", res.error)
                self.assertEqual(res.calls, [])
                self.assertNotIn("sandbox_runner", res.error["traceback"])
        res = self.client.exec("await mcp_everything.echo(message=5)")
        self.assertIn("'message' must be string, not int", res.error["message"])
        self.assertIn("mcp_everything.echo()", res.error["message"])

    def test_arguments_nested_deeper_than_120_levels_are_refused(self):
        # sandboxd refuses a frame deeper than 128 levels, and the tool_call frame adds two
        answer = lambda frame: {"ok": True, "result": text_result("1")}  # noqa: E731
        self.client.exec("keep = 42\n"
                         "def deep(n):\n"
                         "    v = 1\n"
                         "    for i in range(n):\n"
                         "        v = [v] if i % 2 else {'o': v}\n"
                         "    return v")
        res = self.client.exec(
            "await call_tool('everything', 'echo', {'message': 'm', 'd': deep(120)})\n"
            "await mcp_everything.search(query='q', tags=[deep(119)])", on_tool_call=answer)
        self.assertOk(res)
        depth = lambda v: 1 + max(map(depth, v.values() if isinstance(v, dict) else v),  # noqa
                                  default=0) if isinstance(v, (dict, list)) else 0
        self.assertEqual([depth(c) for c in res.calls], [122, 122])
        for n in (121, 125, 200):
            for code in (f"call_tool('everything', 'echo', {{'message': 'm', 'd': deep({n})}})",
                         f"mcp_everything.search(query='q', tags=[deep({n - 1})])"):
                with self.subTest(code=code):
                    self.assertRefusedUnsent(code, answer, "TypeError",
                                             "nested deeper than 120 levels")
        # a value that grows while its call waits for a slot is checked again when it goes out
        slow = lambda frame: time.sleep(0.3) or answer(frame)  # noqa: E731
        res = self.client.exec(
            "d = []\n"
            "a = asyncio.ensure_future(mcp_everything.echo(message='a'))\n"
            "b = asyncio.ensure_future(call_tool('everything', 'echo', {'message': 'b', 'd': d}))\n"
            "await asyncio.sleep(0.1)\n"
            "d.append(deep(125))\n"
            "await a\n"
            "await b", on_tool_call=slow, max_tool_calls_in_flight=1)
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "ToolError", res.error)
        self.assertIn("arguments not sent: nested deeper than 120 levels", res.error["message"])
        self.assertEqual(len(res.calls), 1)
        self.assertEqual(self.client.exec("keep").value, 42)

    def test_arguments_of_more_values_than_sandboxd_takes_are_refused(self):
        # sandboxd refuses a frame of more than 131,072 JSON values (and ends the session):
        # a call's arguments of more are refused here, before anything is sent.
        answer = lambda frame: {"ok": True, "result": text_result("1")}  # noqa: E731
        self.client.exec("keep = 42")
        res = self.client.exec("await call_tool('everything', 'echo', "
                               "{'message': 'm', 'd': [0] * 131000})", on_tool_call=answer)
        self.assertOk(res)
        self.assertEqual(len(res.calls[0]["arguments"]["d"]), 131000)
        for code in ("call_tool('everything', 'echo', {'message': 'm', 'd': [0] * 131100})",
                     "mcp_everything.search(query='q', tags=[[0] * 200000])"):
            with self.subTest(code=code):
                self.assertRefusedUnsent(code, answer, "TypeError", "holds more than 131056 values")
        # two arguments within the bound each, over it together: refused as they go out (the
        # wasm tier's JavaScript side says which argument went over)
        self.assertRefusedUnsent("call_tool('everything', 'echo', "
                                 "{'message': 'm', 'a': [0] * 70000, 'b': [0] * 70000})",
                                 answer, "ToolError", "more than 131056 values")
        self.assertEqual(self.client.exec("keep").value, 42)

    def test_arguments_sandboxd_could_not_read_are_refused(self):
        # sandboxd reads a number as a 64-bit integer or a double and ends the session over
        # a frame it cannot read: an integer past a double's range is refused here.
        answer = lambda frame: {"ok": True, "result": text_result("1")}  # noqa: E731
        self.client.exec("keep = 42")
        res = self.client.exec("await call_tool('everything', 'echo', "
                               "{'message': 'm', 'n': [2**64 + 1, -(2**63), 2**1023]})",
                               on_tool_call=answer)
        self.assertOk(res)
        # (as doubles: the wasm tier's calls pass through JavaScript numbers)
        self.assertEqual([float(n) for n in res.calls[0]["arguments"]["n"]],
                         [float(2**64 + 1), float(-(2**63)), float(2**1023)])
        for n in ("10**400", "-(10**400)", "2**1024"):
            with self.subTest(n=n):
                self.assertRefusedUnsent(f"call_tool('everything', 'echo', {{'message': 'm', 'n': {n}}})",
                                         answer, "TypeError", "beyond the range of a double")
        # counted as json.dumps writes it, not as the object's own methods say
        self.client.exec("class Sly(dict):\n    def values(self):\n        return []")
        self.assertRefusedUnsent("call_tool('everything', 'echo', "
                                 "{'message': 'm', 'd': Sly(a=[0] * 140000)})",
                                 answer, "TypeError", "holds more than 131056 values")
        self.assertEqual(self.client.exec("keep").value, 42)

    def assertRefusedUnsent(self, code, answer, error_type, message):
        """`await code` fails with `error_type` saying `message`, and no call went out."""
        res = self.client.exec(f"await {code}", on_tool_call=answer)
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], error_type, res.error)
        self.assertIn(message, res.error["message"])
        self.assertEqual(res.calls, [])

    def test_only_given_arguments_are_sent(self):
        answer = lambda frame: {"ok": True, "result": text_result("[]")}  # noqa: E731
        res = self.client.exec(
            "await mcp_everything.search('q', max_depth=2)\n"
            "await mcp_everything.search(query='q', limit=None, tags=None)\n"
            "await mcp_everything.search(query='q', limit=3, tags=('a',))",
            on_tool_call=answer)
        self.assertOk(res)
        self.assertEqual([c["arguments"] for c in res.calls], [
            {"query": "q", "max-depth": 2},
            {"query": "q", "tags": None},
            {"query": "q", "limit": 3, "tags": ["a"]},
        ])
        self.assertEqual({(c["server"], c["tool"]) for c in res.calls},
                         {("everything", "search")})

    def test_result_conversions(self):
        results = {
            "structured": {"ok": True, "result": {"content": [{"type": "text", "text": "x"}],
                                                  "structuredContent": {"k": 1}}},
            "json": {"ok": True, "result": text_result('{"a": [1, 2]}')},
            "plain": {"ok": True, "result": text_result("hello world")},
            "image": {"ok": True, "result": {"content": [
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}},
            "two": {"ok": True, "result": {"content": [{"type": "text", "text": "a"},
                                                       {"type": "text", "text": "b"}]}},
            "iserror": {"ok": True, "result": {"content": [{"type": "text", "text": "boom"}],
                                               "isError": True}},
            "notok": {"ok": False, "error": "upstream down"},
            "malformed": {"ok": True, "result": "not an object"},
        }
        res = self.client.exec(
            "out, errors = {}, {}\n"
            f"for name in {list(results)!r}:\n"
            "    try:\n"
            "        out[name] = await mcp_everything.echo(message=name)\n"
            "    except ToolError as e:\n"
            "        errors[name] = [e.server, e.tool, e.message, str(e)]\n"
            "[out, errors]",
            on_tool_call=lambda frame: results[frame["arguments"]["message"]])
        self.assertOk(res)
        out, errors = res.value
        self.assertEqual(out, {
            "structured": {"k": 1},
            "json": {"a": [1, 2]},
            "plain": "hello world",
            "image": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "two": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        })
        self.assertEqual(errors, {
            "iserror": ["everything", "echo", "boom", "everything.echo: boom"],
            "notok": ["everything", "echo", "upstream down",
                      "everything.echo: upstream down"],
            "malformed": ["everything", "echo", "malformed tool result",
                          "everything.echo: malformed tool result"],
        })
        call_ids = [c["call_id"] for c in res.calls]
        self.assertEqual(len(set(call_ids)), len(call_ids))

    def test_uncaught_tool_error(self):
        res = self.client.exec(
            "r = await mcp_everything.echo(message='x')",
            on_tool_call=lambda frame: {"ok": False, "error": "nope"})
        self.assertEqual(res.error["type"], "ToolError")
        self.assertEqual(res.error["message"], "everything.echo: nope")
        tb = res.error["traceback"]
        self.assertIn("<cell-1>", tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertTrue(tb.endswith("ToolError: everything.echo: nope\n"), tb)

    def test_gather_is_concurrent(self):
        exec_id = self.client.start_exec(
            "print('before')\n"
            "results = await asyncio.gather(*(mcp_everything.add(a=i, b=1)"
            " for i in range(20)))\nresults")
        calls = []
        while len(calls) < 20:     # no result is sent until all 20 calls arrived
            frame = self.client.recv()
            if frame["type"] == "tool_call":
                calls.append(frame)
            else:
                self.assertEqual(frame["type"], "output")
        for call in reversed(calls):
            total = call["arguments"]["a"] + call["arguments"]["b"]
            self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                              "result": {"content": [{"type": "text", "text": str(total)}],
                                         "structuredContent": {"sum": total}}})
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, [{"sum": i + 1} for i in range(20)])

    def test_calls_past_the_in_flight_limit_wait_in_the_runner(self):
        # 30 gathered calls, 4 answered at a time: never more than 4 tool_call frames are
        # unanswered, and every call completes (back-pressure, not errors), in order.
        exec_id = self.client.start_exec(
            "rs = await asyncio.gather(*(mcp_everything.add(a=i, b=1) for i in range(30)))\n"
            "[r['sum'] for r in rs]", max_tool_calls_in_flight=4)
        seen = []
        while len(seen) < 30:
            burst = [self.client.expect("tool_call")]
            try:
                while True:                        # whatever else the runner sends now
                    burst.append(self.client.recv(0.3))
            except socket.timeout:
                pass
            self.assertTrue(all(f["type"] == "tool_call" for f in burst), burst)
            self.assertLessEqual(len(burst), 4)
            for call in burst:
                seen.append(call["arguments"]["a"])
                total = call["arguments"]["a"] + call["arguments"]["b"]
                self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                                  "result": {"content": [], "structuredContent":
                                             {"sum": total}}})
        self.assertEqual(seen, list(range(30)))
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, [i + 1 for i in range(30)])

    def test_held_back_calls_fail_when_the_exec_ends_and_the_limit_is_fresh_next_time(self):
        # Background tasks waiting for a slot get ToolError once their exec is over, and
        # the next exec starts with its own limit.
        res = self.client.exec(
            "async def one(i):\n"
            "    try:\n        return await mcp_everything.add(a=i, b=1)\n"
            "    except ToolError as e:\n        return str(e)\n"
            "held = [asyncio.ensure_future(one(i)) for i in range(3)]\n"
            "await asyncio.sleep(0.2)\n", on_tool_call=lambda frame: None,
            max_tool_calls_in_flight=1)
        self.assertOk(res)
        self.assertEqual(len(res.calls), 1)          # limit 1 from below; two held back
        res = self.client.exec("await asyncio.sleep(0.05)\n"
                               "[h.result() if h.done() else 'pending' for h in held]")
        self.assertOk(res)
        self.assertTrue(all("ended before" in r for r in res.value), res.value)
        res = self.client.exec(
            "await asyncio.gather(*(mcp_everything.add(a=i, b=1) for i in range(3)))",
            on_tool_call=lambda f: {"ok": True, "result": {"content": [], "structuredContent":
                                                           {"sum": 0}}})
        self.assertOk(res)
        self.assertEqual(len(res.calls), 3)

    def test_exec_frame_with_a_bad_in_flight_limit_is_a_protocol_error(self):
        self.client.send({"type": "exec", "id": self.client.new_id(), "code": "1",
                          "max_output_bytes": MIB, "max_tool_calls_in_flight": 0})
        self.assertTrue(self.client.at_eof(5))

    def test_call_tool_generic(self):
        res = self.client.exec(
            "await call_tool('memory', 'read_graph')",
            on_tool_call=lambda frame: {"ok": True, "result": text_result('{"nodes": []}')})
        self.assertOk(res)
        self.assertEqual(res.value, {"nodes": []})
        self.assertEqual(res.calls[0]["arguments"], {})
        res = self.client.exec("await call_tool('memroy', 'read_graph')")
        self.assertEqual(res.error["type"], "ValueError")
        self.assertIn("'memory'", res.error["message"])
        res = self.client.exec("await call_tool('memory', 'read_graph', [1])")
        self.assertEqual(res.error["type"], "TypeError")
        self.assertEqual(res.calls, [])

    def test_tool_call_outside_an_exec_fails(self):
        self.client.exec(
            "import threading\nbox = []\n"
            "def later():\n"
            "    import time\n    time.sleep(0.3)\n"
            "    try:\n        asyncio.run(mcp_memory.read_graph())\n"
            "    except ToolError as e:\n        box.append(str(e))\n"
            "th = threading.Thread(target=later)\nth.start()")
        time.sleep(0.6)
        res = self.client.exec("th.join(5)\nbox")
        self.assertEqual(res.value, ["memory.read_graph: tool calls only work while an "
                                     "execution is running"])
        self.assertEqual(res.calls, [])


if __name__ == "__main__":
    unittest.main()
