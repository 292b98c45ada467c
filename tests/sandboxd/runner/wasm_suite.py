"""The runner suite against the wasm tier's runner (sandbox_runner.js --language python,
Python in Pyodide; harness.py's SANDBOXD_RUNNER_WASM=1): every test of this folder but the
ones below, which check what the wasm tier does not have or does elsewhere (an entry names a
test, or a whole module). An entry that names no test any more fails the run, so the list
stays true.

    SANDBOXD_RUNNER_PYZ=... SANDBOXD_RUNNER_JS=... python3 tests/sandboxd/runner/wasm_suite.py
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

NOT_APPLICABLE = {
    "test_execution.OutputTest.test_writes_outside_an_exec_are_dropped":
        "starts a thread (Pyodide has none)",
    "test_tool_calls.ToolCallTest.test_tool_call_outside_an_exec_fails":
        "starts a thread (Pyodide has none)",
    "test_pip_in_cell.PipInCellRunnerTest.test_a_cell_waiting_for_another_threads_pip_is_interrupted":
        "holds pip in a thread (Pyodide has none)",
    "test_display.DisplayTest.test_image_helper_reads_files":
        "reads a host path outside the workspace (Python sees /workspace only)",
    "test_files.FilesTest.test_upload_then_code_reads_it_and_download_returns_the_same_bytes":
        "reads the workspace by its host path (Python sees it at /workspace)",
    "test_interrupts.InterruptTest.test_interrupt_whose_signal_the_handler_never_saw":
        "takes the SIGINT with sigwait (Pyodide has no signals; its interrupts are a buffer)",
    "test_protocol.BasicsTest.test_socket_is_world_connectable":
        "the socket is bound by sandboxd, not by the runner",
    "test_footprint.IdleFootprintTest.test_an_idle_session_has_not_imported_what_it_may_never_use":
        "Pyodide's own start-up imports ssl and platform (they are in its memory snapshot)",
    "test_footprint.IdleWithoutToolsTest.test_a_session_without_tool_servers_has_not_imported_the_catalog":
        "the wasm tier's host (pyodide_host.py) parses catalogs itself and imports catalog.py at start",
    "test_footprint.ImportOrderTest.test_datetime_is_imported_before_asyncio":
        "pyodide_host.py imports asyncio first (the wasm tier's start-up memory is Pyodide's snapshot)",
    "test_footprint.IdleThreadsTest":
        "counts the container runner's threads (Pyodide has none; the wasm tier's are Node's)",
    "test_footprint.AsyncioTlsTest":
        "asyncio's TLS in a container session: Pyodide has no sockets, and its ssl is loaded",
    "test_tool_calls.ToolCallTest.test_arguments_nested_deeper_than_120_levels_are_refused":
        "arguments are serialized when the call is made, not when its slot frees "
        "(the main thread keeps the in-flight limit)",
    "test_out_digest.DoneFrameTest":
        "the wasm tier's runner sends no fingerprint of out/ (the gateway walks out/ after every run)",
    "test_interrupts.InterruptTest.test_interrupt_reaches_a_print_loop_at_its_next_print":
        "blocks SIGINT with pthread_sigmask (the wasm tier interrupts through Pyodide's "
        "interrupt buffer, which it writes until the exec is done)",
    "test_interrupts.InterruptTest.test_interrupt_is_not_raised_in_a_signal_handler_inside_a_send":
        "installs a SIGUSR1 handler and blocks SIGINT (the wasm tier's only signal is the "
        "interrupt buffer's SIGINT)",
    "test_user_signals":
        "signals from outside the runner (the wasm tier's only signal is the interrupt "
        "buffer's SIGINT)",
    "test_egress":
        "the wasm tier's relay takes egress.sock from sandboxd and serves fetch() and Python's "
        "sockets over the worker's egress port, with no loopback listener "
        "(runner_js/egress_wasm.test.mjs)",
}


def _covers(name, test_id):
    """Whether the NOT_APPLICABLE entry `name` is the test `test_id` or its module."""
    return test_id == name or test_id.startswith(name + ".")


def _ids(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _ids(item)
        else:
            yield item


def main():
    os.environ["SANDBOXD_RUNNER_WASM"] = "1"
    sys.path.insert(0, HERE)
    tests = list(_ids(unittest.defaultTestLoader.discover(HERE, pattern="test_*.py")))
    names = {t.id() for t in tests}
    stale = sorted(n for n in NOT_APPLICABLE if not any(_covers(n, t) for t in names))
    if stale:
        print(f"wasm_suite.py: NOT_APPLICABLE names missing tests: {stale}", file=sys.stderr)
        return 1
    suite = unittest.TestSuite(t for t in tests
                               if not any(_covers(n, t.id()) for n in NOT_APPLICABLE))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() and not result.skipped else 1


if __name__ == "__main__":
    sys.exit(main())
