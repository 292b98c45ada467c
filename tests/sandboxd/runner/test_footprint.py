"""What an idle session costs: the runner imports nothing a session may never use (ssl for
TLS without a network, typing for asyncio's annotations, argparse for three options, difflib for a misspelt name, platform
for a version string, queue.py for one work queue, struct for a frame's length, the file
frames' and display's code until they are used, the egress relay's code, which only its own
process runs), and each is still there the moment code needs it: asyncio's TLS works
whether code imported ssl first or not, and in a session with egress."""

import ast
import json
import os
import socket
import subprocess
import sys
import time
import unittest

from harness import CATALOG, RUNNER, TIMEOUT, CatalogTestCase, RunnerTestCase

NEVER_AT_IDLE = ("ssl", "typing", "argparse", "difflib", "platform", "base64", "hashlib", "queue",
                 "struct", "sandbox_runner.files", "sandbox_runner.display_objects",
                 "sandbox_runner.egress_relay")


def _interpreter_start_modules():
    """What the interpreter itself has imported before any runner code: `site` and the .pth
    files of the Python that runs the tests (a host's may import certifi, and with it
    zipfile and struct). The runner answers only for what it adds."""
    out = subprocess.run([sys.executable, "-I", "-c", "import sys; print(sorted(sys.modules))"],
                         capture_output=True, text=True, check=True, timeout=TIMEOUT).stdout
    return set(ast.literal_eval(out))


class IdleFootprintTest(CatalogTestCase):
    def test_an_idle_session_has_not_imported_what_it_may_never_use(self):
        never = tuple(m for m in NEVER_AT_IDLE if m not in _interpreter_start_modules())
        self.assertIn("ssl", never)
        res = self.client.exec(f"import sys\nsorted(m for m in {never!r} if m in sys.modules)")
        self.assertOk(res)
        self.assertEqual(res.result, "[]")

    def test_mcp_display_loads_its_wrappers_when_code_looks_one_up(self):
        res = self.client.exec("import mcp.display\nmcp.display.display == display")
        self.assertEqual(res.result, "True")
        res = self.client.exec("from mcp.display import *\n"
                               "(sorted(mcp.display.__all__), HTML.__module__,\n"
                               " {'Image', 'JSON'} <= set(dir(mcp.display)))")
        self.assertOk(res)
        self.assertEqual(res.result, "(['HTML', 'Image', 'JSON', 'Latex', 'Markdown', 'SVG', "
                                     "'display'], 'mcp.display', True)")

    def test_a_misspelt_tool_name_still_gets_suggestions(self):
        res = self.client.exec("await mcp_everything.ech(message='x')")
        self.assertEqual(res.status, "error")
        self.assertIn("did you mean 'echo'", res.error["message"])

    def test_code_that_imports_ssl_gets_the_real_module(self):
        res = self.client.exec("import ssl\nssl.create_default_context().verify_mode == ssl.CERT_REQUIRED")
        self.assertOk(res)
        self.assertEqual(res.result, "True")


class IdleWithoutToolsTest(RunnerTestCase):
    def test_a_session_without_tool_servers_has_not_imported_the_catalog(self):
        res = self.client.exec("import sys\n'sandbox_runner.catalog' in sys.modules")
        self.assertOk(res)
        self.assertEqual(res.result, "False")

    def test_a_catalog_that_comes_after_a_cell_gives_the_tools(self):
        self.assertOk(self.client.exec("x = 1"))
        self.client.set_catalog(CATALOG)
        res = self.client.exec("await mcp_everything.ech(message='x')")
        self.assertEqual(res.status, "error")
        self.assertIn("did you mean 'echo'", res.error["message"])


class ImportOrderTest(RunnerTestCase):
    def test_datetime_is_imported_before_asyncio(self):
        """The pure-Python classes datetime.py builds and drops leave room that asyncio's
        import then fills; imported after it, they leave a hole (0.1 MiB) in every idle
        session's heap."""
        res = self.client.exec("import sys\nlist(sys.modules)")
        self.assertOk(res)
        modules = eval(res.result)           # a list of module names
        self.assertLess(modules.index("datetime"), modules.index("asyncio"))


# What the runner's import of asyncio leaves, and what code then sees of asyncio and typing,
# printed as JSON by an interpreter without `site` (a host's site may import typing
# itself). `hidden` runs the runner's import_asyncio from the zipapp first.
TYPING_PROBE = """
import json, sys
if {hidden}:
    sys.path.insert(0, {runner!r})
    from sandbox_runner.ssl_on_demand import import_asyncio
    import_asyncio()
import asyncio, inspect
seen = {{"typing_after_asyncio": "typing" in sys.modules}}
seen["signatures"] = [str(inspect.signature(f)) for f in (
    asyncio.timeout, asyncio.timeout_at, asyncio.Timeout.__init__, asyncio.Timeout.__aexit__,
    asyncio.Timeout.when.fget if isinstance(asyncio.Timeout.when, property) else
    asyncio.Timeout.when, asyncio.staggered.staggered_race)]
seen["final"] = getattr(asyncio.Timeout, "__final__", None)
async def main():
    async with asyncio.timeout(5):
        await asyncio.sleep(0)
    return "ran"
seen["timeout"] = asyncio.run(main())
seen["typing_after_a_timeout"] = "typing" in sys.modules
from typing import List, get_type_hints
import typing
seen["list"] = repr(List[int])
seen["hints"] = [repr(get_type_hints(f)) for f in (
    asyncio.timeout, asyncio.Timeout.__aexit__, asyncio.staggered.staggered_race)]
seen["real_names"] = [asyncio.staggered.typing is typing,
                      asyncio.timeouts.Optional is typing.Optional,
                      asyncio.timeouts.final is typing.final, asyncio.timeouts.Type is typing.Type]
print(json.dumps(seen))
"""


class TypingOnDemandTest(unittest.TestCase):
    """asyncio is imported without typing (0.45 MiB of an idle session), and code sees
    asyncio and typing as it would have without the stand-in."""

    def probe(self, hidden, extra=""):
        out = subprocess.run([sys.executable, "-I", "-S", "-c",
                              TYPING_PROBE.format(hidden=hidden, runner=str(RUNNER)) + extra],
                             capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_asyncio_comes_without_typing_and_code_sees_no_difference(self):
        reference = self.probe(False)
        seen = self.probe(True)
        self.assertTrue(reference.pop("typing_after_asyncio"), "the reference imports typing")
        self.assertFalse(seen.pop("typing_after_asyncio"))
        self.assertFalse(seen.pop("typing_after_a_timeout"))
        reference.pop("typing_after_a_timeout")
        self.assertEqual(seen, reference)
        self.assertEqual(seen["real_names"], [True] * 4)
        self.assertTrue(seen["final"])

    def test_a_name_looked_up_through_asyncio_imports_the_real_typing(self):
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c",
             f"import sys\nsys.path.insert(0, {str(RUNNER)!r})\n"
             "from sandbox_runner.ssl_on_demand import import_asyncio\nimport_asyncio()\n"
             "import asyncio.staggered\noptional = asyncio.staggered.typing.Optional\n"
             "import typing\nprint(optional is typing.Optional, asyncio.staggered.typing is typing)"],
            capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "True True")


# The runner's threads, as user code sees them: the kernel's list, so threads that
# `threading` does not know count too.
THREADS = "import os\nlen(os.listdir('/proc/self/task'))"


class IdleThreadsTest(RunnerTestCase):
    """An idle session runs two threads: the main thread and the connections thread, which
    accepts and reads. Each thread more costs an idle session about 50 KiB (its kernel
    stack and task, its stack pages and page tables, docs/benchmarks/sandboxd.md)."""

    def test_an_idle_session_after_a_silent_cell_runs_two_threads(self):
        self.assertOk(self.client.exec("x = 1"))
        res = self.client.exec(THREADS)
        self.assertOk(res)
        self.assertEqual(res.result, "2")

    def test_the_output_flusher_runs_while_output_waits_and_ends_when_idle(self):
        res = self.client.exec("import time\nprint('a')\ntime.sleep(0.2)\n" + THREADS)
        self.assertOk(res)
        self.assertEqual(res.result, "3")
        self.assertEqual(res.stream("stdout"), "a\n")
        # The flusher ends OUTPUT_FLUSHER_IDLE (1 s) after the last output waited.
        deadline = time.monotonic() + TIMEOUT
        while True:
            res = self.client.exec(THREADS)
            self.assertOk(res)
            if res.result == "2" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(res.result, "2")
        # And the next output that waits starts it again.
        res = self.client.exec("import time\nprint('b')\ntime.sleep(0.5)\n" + THREADS)
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "b\n")
        self.assertEqual(res.result, "3")

    def test_a_new_connection_replaces_the_old_without_a_thread_more(self):
        self.assertOk(self.client.exec("x = 1"))
        second = self.connect()
        second.expect("ready")
        res = second.exec(THREADS)
        self.assertOk(res)
        self.assertEqual(res.result, "2")


# A cell that opens a TLS connection with asyncio to HOST:PORT (`ssl` is SSL: True or a
# context) and returns the type of the error the handshake ended with. Whoever listens
# there reads the ClientHello and hangs up.
TLS_CELL = """
import asyncio
try:
    await asyncio.wait_for(asyncio.open_connection({host!r}, {port}, ssl={ssl},
                                                   server_hostname="example.com"), 10)
    ended = "connected"
except Exception as exc:
    ended = type(exc).__name__
ended
"""

# The same against a listener of the cell's own that keeps the first bytes it reads.
LOCAL_TLS_CELL = """
import asyncio
first_bytes = []
async def _hang_up(reader, writer):
    first_bytes.append(await reader.read(3))
    writer.close()
_server = await asyncio.start_server(_hang_up, "127.0.0.1", 0)
_port = _server.sockets[0].getsockname()[1]
""" + TLS_CELL.format(host="127.0.0.1", port="_port", ssl="{ssl}") + """
_server.close()
(first_bytes, ended)
"""

# A TLS 1.x handshake record starts 0x16 0x03; asyncio without its ssl module sends nothing
# and raises RuntimeError('stdlib ssl module not available').
CLIENT_HELLO = "[b'\\x16\\x03\\x01']"


class AsyncioTlsTest(RunnerTestCase):
    def modules(self, *names):
        res = self.client.exec(f"import sys\nsorted(m for m in {names!r} if m in sys.modules)")
        self.assertOk(res)
        return res.result

    def test_asyncio_tls_imports_ssl_when_used(self):
        res = self.client.exec(LOCAL_TLS_CELL.replace("{ssl}", "True"))
        self.assertOk(res)
        self.assertTrue(res.result.startswith(f"({CLIENT_HELLO}, "), res.result)
        self.assertNotIn("RuntimeError", res.result)
        self.assertEqual(self.modules("ssl"), "['ssl']")

    def test_asyncio_tls_after_code_imported_ssl(self):
        res = self.client.exec("import ssl\n_context = ssl.create_default_context()")
        self.assertOk(res)
        res = self.client.exec(LOCAL_TLS_CELL.replace("{ssl}", "_context"))
        self.assertOk(res)
        self.assertTrue(res.result.startswith(f"({CLIENT_HELLO}, "), res.result)
        res = self.client.exec("import asyncio.sslproto, asyncio.base_events\n"
                               "asyncio.sslproto.ssl is ssl is asyncio.base_events.ssl")
        self.assertEqual(res.result, "True")

    def test_socket_calls_of_the_loop_do_not_import_ssl(self):
        res = self.client.exec("import asyncio, socket\na, b = socket.socketpair()\n"
                               "a.setblocking(False)\nb.setblocking(False)\n"
                               "loop = asyncio.get_running_loop()\n"
                               "await loop.sock_sendall(a, b'x')\nawait loop.sock_recv(b, 1)")
        self.assertOk(res)
        self.assertEqual(res.result, "b'x'")
        self.assertEqual(self.modules("ssl"), "[]")

    def test_a_session_with_egress_opens_tls_through_the_relay(self):
        frame_id = self.client.new_id()
        self.client.send({"type": "egress", "id": frame_id})
        port = self.client.expect("egress_on")["port"]
        host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # sandboxd's parked dialer
        self.addCleanup(host.close)
        host.settimeout(TIMEOUT)
        host.connect(os.path.join(self.tmp.name, "egress.sock"))
        self.assertEqual(self.modules("ssl"), "[]")
        exec_id = self.client.start_exec(TLS_CELL.format(host="127.0.0.1", port=port,
                                                         ssl="True"))
        self.assertEqual(host.recv(3), b"\x16\x03\x01")
        host.close()
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertNotIn("RuntimeError", res.result)


if __name__ == "__main__":
    unittest.main()
