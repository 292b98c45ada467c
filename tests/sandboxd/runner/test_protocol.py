"""The runner's frame protocol and connections: `ready`, `ping`, persistence between execs,
`reset`, reconnects, and malformed frames that close a connection."""

import os
import unittest

from harness import CATALOG, MIB, RunnerTestCase


class BasicsTest(RunnerTestCase):
    def test_ready_frame(self):
        self.assertEqual(self.ready["runner_version"], 2)
        self.assertEqual(self.ready["pid"], self.proc.pid)
        self.assertEqual(self.ready["execs"], 0)
        self.assertRegex(self.ready["python"], r"^3\.\d+\.\d+")

    def test_socket_is_world_connectable(self):
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o777)

    def test_ping(self):
        self.client.send({"type": "ping", "id": 7})
        self.assertEqual(self.client.expect("pong")["id"], 7)

    def test_persistence_and_trailing_expression(self):
        res = self.client.exec("x = 1")
        self.assertOk(res)
        self.assertIsNone(res.result)
        res = self.client.exec("x + 1")
        self.assertOk(res)
        self.assertEqual(res.result, "2")
        self.assertIsNone(res.error)
        self.assertEqual(res.done["output_bytes"], 0)
        self.assertEqual(res.done["dropped_bytes"], 0)

    def test_trailing_none_is_null(self):
        res = self.client.exec("print('hi')")
        self.assertOk(res)
        self.assertIsNone(res.result)
        self.assertEqual(res.stream("stdout"), "hi\n")
        self.assertIsNone(self.client.exec("None").result)

    def test_namespace_basics(self):
        res = self.client.exec(
            "import sys\n"
            "[__name__, type(asyncio).__name__, json.dumps([1]), sys.stdin.read(),"
            " sys.stdout.isatty(), sys.stdout.encoding,"
            " sys.modules['__main__'].__dict__ is globals()]")
        self.assertOk(res)
        self.assertEqual(res.value, ["__main__", "module", "[1]", "", False, "utf-8", True])

    def test_result_repr_is_capped(self):
        res = self.client.exec("'a' * 100000")
        self.assertOk(res)
        self.assertTrue(res.result.startswith("'aaaa"))
        self.assertIn("...[truncated ", res.result)
        self.assertLess(len(res.result), 66 * 1024)

    def test_exec_count_in_ready_after_reconnect(self):
        self.client.exec("a = 1")
        self.client.exec("b = 2")
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 2)


class ResetTest(RunnerTestCase):
    def test_reset_clears_variables(self):
        self.client.set_catalog(CATALOG)
        self.client.exec("x = 1\nimport os")
        self.client.reset()
        res = self.client.exec("x")
        self.assertEqual(res.error["type"], "NameError")
        res = self.client.exec("[type(mcp_everything).__name__, 'os' in globals(),"
                               " json.dumps(1), __name__]")
        self.assertEqual(res.value, ["MCPServer", False, "1", "__main__"])
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 2)   # counted since the reset


class ConnectionTest(RunnerTestCase):
    def test_reconnect_keeps_namespace(self):
        self.client.exec("x = 5")
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 1)
        self.assertEqual(client.exec("x").result, "5")

    def test_new_connection_replaces_old(self):
        self.client.exec("y = 'old'")
        second = self.connect()
        second.expect("ready")
        self.assertTrue(self.client.at_eof(timeout=5))
        self.assertEqual(second.exec("y").result, "'old'")

    def test_garbage_frame_closes_connection(self):
        self.client.exec("z = 3")
        self.client.send_raw(b"this is not json")
        self.assertTrue(self.client.at_eof(timeout=5))
        client = self.connect()
        client.expect("ready")
        self.assertEqual(client.exec("z").result, "3")

    def test_malformed_frames_close_connection(self):
        bad_frames = [
            (b"[1, 2]", None),                                   # not an object
            (b'{"id": 1}', None),                                # no type
            (b'{"type": "exec", "id": "1", "code": "1", "max_output_bytes": 1}', None),
            (b'{"type": "set_catalog", "id": 1, "catalog": {"servers": [{}]}}', None),
            (b"", 16 * MIB + 1),                                 # over the cap
        ]
        client = self.client
        for body, length in bad_frames:
            with self.subTest(body=body, length=length):
                client.send_raw(body, length)
                self.assertTrue(client.at_eof(timeout=5))
                client = self.connect()
                client.expect("ready")
        self.assertEqual(client.exec("'alive'").result, "'alive'")

    # The call is a task of its own, whose frames are the runner's: the loss also interrupts
    # the cell, and an interrupt stops whatever user code runs while it lands (a handler of
    # the failed call's ToolError in a background task, too), so user code there would race
    # the interrupt.
    def test_connection_loss_during_exec(self):
        self.client.set_catalog(CATALOG)
        self.client.start_exec(
            "t = asyncio.ensure_future(mcp_everything.echo(message='x'))\n"
            "await asyncio.sleep(100)")
        self.client.expect("tool_call")
        self.client.close()
        client = self.connect()
        client.expect("ready")
        res = client.exec("type(t.exception()).__name__, str(t.exception())")
        self.assertOk(res)
        self.assertEqual(res.value, ("ToolError", "everything.echo: sandboxd connection lost"))
        self.assertEqual(client.exec("1 + 2").result, "3")

    def test_connection_loss_interrupts_busy_exec(self):
        exec_id = self.client.start_exec("print('go')\nwhile True:\n    pass")
        self.client.expect("output")
        self.client.close()
        client = self.connect()
        client.expect("ready")
        client.next_id = exec_id + 1000
        res = client.exec("'after'")          # runs only once the old exec was interrupted
        self.assertEqual(res.result, "'after'")   # and the old exec's done was dropped


if __name__ == "__main__":
    unittest.main()
