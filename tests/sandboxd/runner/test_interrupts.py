"""Interrupts: an `interrupt` frame stops busy loops, sleeps, awaits and pending tool calls
with a KeyboardInterrupt in user code, and the runner stays usable afterwards."""

import time
import unittest

from harness import CATALOG, MIB, RunnerTestCase, text_result


class InterruptTest(RunnerTestCase):
    def interrupt_when_started(self, code):
        exec_id = self.client.start_exec("print('started')\n" + code)
        self.client.expect("output")
        time.sleep(0.1)
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id)
        self.assertEqual(res.status, "interrupted", res.error)
        self.assertEqual(res.error["type"], "KeyboardInterrupt")
        self.assertEqual(res.error["message"], "execution interrupted")
        self.assertNotIn("sandbox_runner", res.error["traceback"])
        return res

    def assertStillUsable(self):
        self.assertEqual(self.client.exec("1 + 1").result, "2")
        self.assertEqual(self.client.exec("await asyncio.sleep(0.01)\n'async ok'").result,
                         "'async ok'")

    def test_interrupt_busy_loop(self):
        self.client.exec("kept = 'yes'")
        self.interrupt_when_started("while True:\n    pass")
        self.assertStillUsable()
        self.assertEqual(self.client.exec("kept").result, "'yes'")

    def test_interrupt_sleep(self):
        self.interrupt_when_started("import time\ntime.sleep(100)")
        self.assertStillUsable()

    def test_interrupt_async_sleep(self):
        self.interrupt_when_started("await asyncio.sleep(100)")
        self.assertStillUsable()

    def test_interrupt_async_busy_loop(self):
        self.interrupt_when_started("await asyncio.sleep(0)\nwhile True:\n    pass")
        self.assertStillUsable()

    def test_interrupt_pending_tool_call(self):
        self.client.set_catalog(CATALOG)
        exec_id = self.client.start_exec("await mcp_everything.echo(message='hang')")
        call = self.client.expect("tool_call")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertEqual(res.status, "interrupted")
        # A late result for the abandoned call is ignored.
        self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                          "result": text_result("late")})
        self.assertStillUsable()

    def test_interrupt_of_print_loop_keeps_frames_intact(self):
        # KeyboardInterrupt must never cut an output frame in half: the test client's
        # frame decoder would fail on a corrupt stream.
        self.interrupt_when_started("while True:\n    print('x' * 100)")
        self.interrupt_when_started("import sys\nwhile True:\n    sys.stderr.write('é')")
        self.assertStillUsable()

    def test_interrupt_reaches_a_print_loop_at_its_next_print(self):
        # A loop that is nearly all print() meets a SIGINT mostly in the runner's frames,
        # so the interrupt is raised as a print returns. With SIGINT blocked in user code,
        # that is the only way in; unblocking it afterwards raises no second interrupt.
        res = self.interrupt_when_started(
            "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
            "try:\n    while True:\n        print('x')\n"
            "finally:\n    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
            "    print('unblocked')")
        self.assertTrue(res.stream("stdout").endswith("unblocked\n"))
        self.interrupt_when_started(
            "import signal, sys\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
            "try:\n    while True:\n        sys.stdout.buffer.write(b'x')\n"
            "finally:\n    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})")
        self.assertStillUsable()

    FINALIZER_LOOPS = {
        "printing __del__": "class D:\n    def __del__(self):\n        print('d')\n"
                            "while True:\n    D()",
        "weakref callback": "import weakref\nclass O:\n    pass\n"
                            "while True:\n    o = O()\n"
                            "    ref = weakref.ref(o, lambda r: print('w'))\n    del o",
        # the finalizer runs the very function the exec loops in
        "reentrant": "class D:\n    def __del__(self):\n        spin(20000, False)\n"
                     "def spin(n, make):\n    i = 0\n    while i < n:\n        i += 1\n"
                     "        if make and i % 100 == 0:\n            D()\n"
                     "spin(10**15, True)",
        # the frame the finalizer interrupted returns before its next line
        "busy __del__ in a call": "class D:\n    def __del__(self):\n"
                                  "        for i in range(200000):\n            pass\n"
                                  "def f():\n    D()\nwhile True:\n    f()",
        # the frames the interrupt can land in start after the finalizer swallowed it
        "generator a builtin consumes": "class D:\n    def __del__(self):\n"
                                        "        for i in range(200000):\n            pass\n"
                                        "def g():\n    while True:\n        yield D() and 0\n"
                                        "sum(g())",
        "repr of the trailing expression": "class D:\n    def __init__(self, n):\n"
                                           "        self.n = n\n    def __del__(self):\n"
                                           "        for i in range(self.n):\n"
                                           "            pass\nclass R:\n"
                                           "    def __repr__(self):\n        while True:\n"
                                           "            D(300000)\n"
                                           "(D(10**8), R())[1]",
        # Python clears, in C and unseen, what the close() an io object's finalizer runs
        # raises
        "busy close() of an io object": "import io\nclass F(io.RawIOBase):\n"
                                        "    def close(self):\n"
                                        "        for i in range(200000):\n"
                                        "            pass\nwhile True:\n    F()",
        # it breaks out of the close(), as in plain Python, and reaches the loop
        "close() of an io object that never returns": "import io\n"
                                                      "class F(io.RawIOBase):\n"
                                                      "    def close(self):\n"
                                                      "        while True:\n"
                                                      "            pass\n"
                                                      "F()\nwhile True:\n    pass",
        "under a trace function of its own": "import sys\nsys.settrace(lambda *args: None)\n"
                                             "class D:\n    def __del__(self):\n"
                                             "        for i in range(200000):\n"
                                             "            pass\n"
                                             "try:\n    while True:\n        D()\n"
                                             "finally:\n    sys.settrace(None)",
    }

    def test_interrupt_swallowed_by_a_finalizer_is_raised_again(self):
        # Python ignores an exception raised in __del__ or a weakref callback: an
        # interrupt that lands there is neither lost nor printed, it reaches the loop.
        for name, loop in self.FINALIZER_LOOPS.items():
            with self.subTest(name):
                res = self.interrupt_when_started(loop)
                self.assertNotIn("Exception ignored", res.stream("stderr"))
        self.assertStillUsable()

    def test_interrupt_reaches_io_objects_that_only_look_finalizing(self):
        # What tells an io finalizer's close() is the object's `_finalizing`: one set by
        # hand, and a key of user code with its hash, change nothing for the interrupt.
        self.client.exec("import io\nclass F(io.RawIOBase):\n    def spin(self):\n"
                         "        while True:\n            pass\n"
                         "class Twin(str):\n    def __hash__(self):\n"
                         "        return hash('_finalizing')\n"
                         "    def __eq__(self, other):\n        raise ValueError('compared')")
        for name, setup in (("set by hand", "f._finalizing = True"),
                            ("a key with its hash", "f.__dict__[Twin('x')] = 1")):
            with self.subTest(name):
                self.interrupt_when_started(f"f = F()\n{setup}\nf.spin()")
        self.assertStillUsable()

    def test_interrupt_swallowed_by_a_finalizer_under_an_unraisable_hook_of_its_own(self):
        # The runner's hook is put back as an exec begins; the one user code set still
        # gets every other exception a finalizer raises.
        self.client.exec("import sys\nseen = []\n"
                         "sys.unraisablehook = lambda u: seen.append(repr(u.exc_value))")
        self.interrupt_when_started(self.FINALIZER_LOOPS["busy __del__ in a call"])
        res = self.client.exec("class E:\n    def __del__(self):\n"
                               "        raise ValueError('from E')\nE()\nseen")
        self.assertEqual(res.result, '["ValueError(\'from E\')"]')

    def test_interrupt_swallowed_by_a_finalizer_under_an_unraisable_hook_that_fails(self):
        self.client.exec("import sys\nsys.unraisablehook = 5")
        self.interrupt_when_started(
            "class D:\n    def __del__(self):\n        for i in range(200000):\n"
            "            pass\n        raise ValueError('from D')\n"
            "def f():\n    D()\nwhile True:\n    f()")

    def test_interrupt_is_not_raised_in_a_signal_handler_inside_a_send(self):
        # While sandboxd does not read, the main thread is blocked sending a large write
        # and a user signal handler runs inside that send, printing; the interrupt waits
        # for the write to return (half a frame would break the stream for good).
        exec_id = self.client.start_exec(
            "import signal, sys, threading, time\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
            "signal.signal(signal.SIGUSR1, lambda signum, frame: print('tick'))\n"
            "main = threading.main_thread().ident\n"
            "def kick():\n    while True:\n"
            "        time.sleep(0.005)\n        signal.pthread_kill(main, signal.SIGUSR1)\n"
            "threading.Thread(target=kick, daemon=True).start()\n"
            "while True:\n    sys.stdout.write('x' * 3_000_000)", max_output_bytes=64 * MIB)
        time.sleep(0.5)
        self.client.send({"type": "interrupt", "id": exec_id})
        time.sleep(1)
        res = self.client.finish_exec(exec_id)
        self.assertEqual(res.status, "interrupted", res.error)
        self.assertStillUsable()

    def test_no_thread_trace_hook_of_user_code_runs_in_the_resending_thread(self):
        # The thread that resends SIGINT is the runner's own: a hook that user code sets
        # for new threads (one that raises would end the thread) does not run in it.
        self.client.exec(
            "import sys, threading\nnames = set()\n"
            "def hook(frame, event, arg):\n"
            "    names.add(threading.current_thread().name)\n"
            "threading.settrace(hook)")
        self.interrupt_when_started("import time\ntime.sleep(100)")
        self.assertEqual(self.client.exec("time.sleep(0.1)\nsorted(names)").result, "[]")

    def test_interrupt_caught_by_user_code(self):
        # 'started' is printed inside the try: an interrupt that lands just after the print
        # (the output frame is what the test waits for) is still the code's to catch.
        exec_id = self.client.start_exec(
            "import time\n"
            "try:\n    print('started')\n    time.sleep(100)\nexcept KeyboardInterrupt:\n"
            "    caught = True\n"
            "'survived'")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertOk(res)
        self.assertEqual(res.result, "'survived'")

    def test_interrupt_before_exec_starts(self):
        first = self.client.start_exec("import time\ntime.sleep(0.3)")
        second = self.client.start_exec("while True:\n    pass")
        self.client.send({"type": "interrupt", "id": second})
        self.assertOk(self.client.finish_exec(first))
        self.assertEqual(self.client.finish_exec(second, timeout=5).status, "interrupted")
        self.assertStillUsable()

    def test_interrupt_whose_signal_the_handler_never_saw(self):
        # The cell takes the SIGINT itself (sigwait) before the runner's handler can run,
        # as a signal landing just before time.sleep's system call is seen only after it:
        # the interrupt is sent again until user code gets it.
        exec_id = self.client.start_exec(
            "import signal, time\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\n"
            "print('blocked', flush=True)\n"
            "signal.sigwait([signal.SIGINT])\n"
            "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])\n"
            "time.sleep(60)\n"
            "after = 1")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=10)
        self.assertEqual(res.status, "interrupted", res.error)
        self.assertEqual(self.client.exec("'after' in globals()").result, "False")

    def test_a_handler_of_user_code_runs_none_of_its_methods_in_the_runner(self):
        # The runner checks whose handler is installed before it sends SIGINT again; a
        # handler object whose __repr__ never returns must not stall it there.
        exec_id = self.client.start_exec(
            "import signal, threading, time\n"
            "class Handler:\n"
            "    def __call__(self, signum, frame): pass\n"
            "    def __repr__(self): threading.Event().wait()\n"
            "    __hash__ = None\n"
            "signal.signal(signal.SIGINT, Handler())\n"
            "print('installed', flush=True)\n"
            "time.sleep(0.5)\n"
            "'finished'")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=10)
        self.assertOk(res)
        self.assertEqual(res.result, "'finished'")
        self.assertStillUsable()

    def test_user_raised_keyboard_interrupt_is_an_error(self):
        res = self.client.exec("raise KeyboardInterrupt")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "KeyboardInterrupt")

    def test_interrupt_for_other_exec_is_ignored(self):
        exec_id = self.client.start_exec("import time\ntime.sleep(0.3)\n'finished'")
        self.client.send({"type": "interrupt", "id": exec_id + 1000})
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.result, "'finished'")


if __name__ == "__main__":
    unittest.main()
