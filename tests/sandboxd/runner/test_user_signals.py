"""Signal handlers that user code installs run while its execs run: a signal that arrives
between execs is dropped, never handled in the runner's own frames, and a `reset` puts
none of the old namespace's handlers back."""

import os
import re
import signal
import threading
import time
import unittest

from harness import CATALOG, MIB, RunnerTestCase, import_runner_module, text_result

output_module = import_runner_module("output")


class UserSignalTest(RunnerTestCase):
    def runner_log(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def test_a_signal_between_execs_is_dropped(self):
        self.assertEqual(self.client.exec(
            "import os, signal, time\n"
            "def boom(signum, frame):\n    raise ValueError(f'signal {signum}')\n"
            "signal.signal(signal.SIGUSR1, boom)").status, "ok")
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(0.2)
        self.assertEqual(self.client.exec("1 + 1").result, "2")
        self.assertNotIn("internal error", self.runner_log())
        res = self.client.exec("os.kill(os.getpid(), signal.SIGUSR1)\ntime.sleep(0.2)")
        self.assertEqual((res.status, res.error["message"]),
                         ("error", f"signal {int(signal.SIGUSR1)}"))

    def test_a_repeating_timer_that_raises_can_be_stopped(self):
        self.client.exec(
            "import signal\n"
            "def tick(signum, frame):\n    raise TimeoutError('tick')\n"
            "signal.signal(signal.SIGALRM, tick)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)")
        for _ in range(5):                   # a tick may land in the exec that stops it
            time.sleep(0.1)                  # ticks come between the execs
            if self.client.exec("signal.setitimer(signal.ITIMER_REAL, 0)").status == "ok":
                break
        self.assertEqual(self.client.exec("import time\ntime.sleep(0.2)\n1 + 1").result, "2")

    def test_a_raising_handler_on_a_fast_timer_never_reaches_the_runner(self):
        # Ticks land while the cell ends and the handler is being paused: each exec still
        # gets its `done`, the runner's own code never sees the exception, and the handler
        # is the user's again in the next exec.
        self.client.exec(
            "import signal\n"
            "def tick(signum, frame):\n    raise TimeoutError('tick')\n"
            "signal.signal(signal.SIGALRM, tick)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)")
        for _ in range(300):
            res = self.client.exec("x = 1", timeout=10)
            self.assertIn(res.status, ("ok", "error"))
            if res.status == "error":
                self.assertEqual(res.error["message"], "tick")
        self.assertEqual(self.proc.poll(), None, self.runner_log()[-2000:])
        self.assertNotIn("internal error", self.runner_log())
        for _ in range(20):
            res = self.client.exec("signal.setitimer(signal.ITIMER_REAL, 0)\n"
                                   "signal.getsignal(signal.SIGALRM).__name__")
            if res.status == "ok":
                break
        self.assertEqual(res.result, "'tick'")

    def test_a_dozen_raising_handlers_pending_at_once_never_reach_the_runner(self):
        # All twelve signals are pending when the long C call returns: each handler raises
        # at the next line the main thread runs, the runner's lines after the cell included.
        for exc in ("SystemExit", "ValueError"):
            with self.subTest(exc):
                res = self.client.exec(
                    "import os, signal, sys, threading, time\n"
                    "sys.unraisablehook = sys.__unraisablehook__\n"   # prints what it gets
                    f"def handler(signum, frame):\n    raise {exc}(signum)\n"
                    "numbers = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGWINCH]"
                    " + list(range(signal.SIGRTMIN, signal.SIGRTMIN + 8))\n"
                    "for number in numbers:\n    signal.signal(number, handler)\n"
                    "def send():\n    time.sleep(0.1)\n"
                    "    for number in numbers:\n        os.kill(os.getpid(), number)\n"
                    "threading.Thread(target=send).start()\nsum(range(3 * 10**7))")
                self.assertEqual((res.status, res.error["type"]), ("error", exc))
                self.assertEqual(res.stream("stderr"), "")   # no "Exception ignored in"
                self.assertEqual(self.client.exec(
                    "all(signal.getsignal(number) is handler for number in numbers)").result,
                    "True")
        self.assertEqual(self.proc.poll(), None)
        self.assertNotIn("internal error", self.runner_log())

    def test_what_handlers_raise_as_the_cell_ends_is_dropped_unseen(self):
        # Three pending: one ends the cell, the next two raise at the first line of the
        # runner's finalizers and of an unraisable hook of Python (the cell's own, then
        # the runner's), which would print "Exception ignored in" into the cell's stderr.
        for hook in ("sys.__unraisablehook__", "sys.unraisablehook"):
            with self.subTest(hook):
                res = self.client.exec(
                    "import os, signal, sys, threading, time\n"
                    f"sys.unraisablehook = {hook}\n"
                    "def handler(signum, frame):\n    raise ValueError(signum)\n"
                    "numbers = [signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2]\n"
                    "for number in numbers:\n    signal.signal(number, handler)\n"
                    "def send():\n    time.sleep(0.1)\n"
                    "    for number in numbers:\n        os.kill(os.getpid(), number)\n"
                    "threading.Thread(target=send).start()\nsum(range(3 * 10**7))")
                self.assertEqual((res.status, res.stream("stderr")), ("error", ""))

    def test_a_user_threads_finalizer_errors_all_reach_its_hook_while_cells_end(self):
        # Handlers installed, so each cell ends by swapping handlers; a thread of user
        # code meanwhile raises in finalizers, switching threads every microsecond: every
        # error it raises reaches the hook user code set, none is dropped with the runner's.
        self.assertEqual(self.client.exec(
            "import signal, sys, threading\nsys.setswitchinterval(1e-6)\n"
            "for number in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):\n"
            "    signal.signal(number, lambda signum, frame: None)\n"
            "raised, seen, stop = [0], [0], []\n"
            "def hook(unraisable):\n    seen[0] += 1\nsys.unraisablehook = hook\n"
            "class Fails:\n    def __del__(self):\n        raised[0] += 1\n"
            "        raise ValueError('finalizer')\n"
            "def churn():\n    while not stop:\n        Fails()\n"
            "thread = threading.Thread(target=churn)\nthread.start()").status, "ok")
        for _ in range(200):
            self.assertEqual(self.client.exec("1", timeout=10).status, "ok")
        res = self.client.exec("stop.append(1)\nthread.join()\n"
                               "sys.setswitchinterval(0.005)\n(raised[0] > 0, raised == seen)")
        self.assertEqual(res.result, "(True, True)", res.error)

    def test_a_low_recursion_limit_leaves_the_runner_its_own(self):
        # The cell leaves a limit a few frames over its own depth, and a handler installed
        # (so leaving user code swaps handlers): the runner's code runs with its own limit.
        self.client.exec(
            "import signal, sys\nsignal.signal(signal.SIGUSR1, lambda signum, frame: None)\n"
            "def depth():\n    frame, n = sys._getframe(1), 0\n"
            "    while frame:\n        frame, n = frame.f_back, n + 1\n    return n")
        res = self.client.exec("limit = depth() + 6\nsys.setrecursionlimit(limit)", timeout=10)
        self.assertEqual(res.status, "ok", res.error)
        self.assertEqual(self.client.exec("sys.getrecursionlimit() == limit").result, "True")
        self.assertEqual(self.client.exec("sys.setrecursionlimit(1000)\n1 + 1").result, "2")

    def test_a_limit_a_user_thread_sets_between_cells_stands(self):
        # The cell leaves a low limit, which the runner keeps aside while its own code
        # runs; a thread of user code sets another after the cell: that one stands.
        self.client.exec(
            "import signal, sys, threading, time\n"
            "signal.signal(signal.SIGUSR1, lambda signum, frame: None)\n"
            "def later():\n    time.sleep(0.2)\n    sys.setrecursionlimit(3000)\n"
            "threading.Thread(target=later).start()\nsys.setrecursionlimit(500)")
        time.sleep(0.4)
        self.assertEqual(self.client.exec("sys.getrecursionlimit()").result, "3000")

    def test_a_reset_puts_no_old_handler_back(self):
        self.client.exec(
            "import signal\n"
            "def tick(signum, frame):\n    raise TimeoutError('tick')\n"
            "signal.signal(signal.SIGALRM, tick)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)")
        self.client.reset()
        time.sleep(0.2)
        res = self.client.exec("import time\ntime.sleep(0.3)\n1 + 1")
        self.assertEqual(res.result, "2", res.error)
        self.assertEqual(self.proc.poll(), None)

    def test_a_handler_that_prints_inside_a_send_loses_nothing(self):
        # The handler runs inside the runner's send of a 1 MiB frame, on the thread that
        # holds the socket's lock, and writes more than a flush's worth.
        res = self.client.exec(
            "import signal, sys, threading, time\ncalls = 0\n"
            "def handler(signum, frame):\n    global calls\n    calls += 1\n"
            "    print('y' * 9000)\n"
            "signal.signal(signal.SIGUSR1, handler)\n"
            "main = threading.main_thread().ident\n"
            "def kick():\n    for _ in range(50):\n"
            "        time.sleep(0.01)\n        signal.pthread_kill(main, signal.SIGUSR1)\n"
            "threading.Thread(target=kick).start()\n"
            "for _ in range(8):\n    sys.stdout.write('x' * 3_000_000)\n"
            "time.sleep(0.6)\ncalls", max_output_bytes=64 * MIB)
        self.assertEqual(res.status, "ok", res.error)
        self.assertEqual(res.stream("stdout").count("y" * 9000), int(res.result))

    def test_a_handler_that_prints_while_a_tool_call_is_sent_loses_nothing(self):
        # sandboxd does not read: the main thread is blocked sending a large tool_call
        # frame, the flusher waits for that send holding the output lock, and the
        # handler on the main thread prints.
        self.client.set_catalog(CATALOG)
        exec_id = self.client.start_exec(
            "import signal, threading, time\ncalls = 0\n"
            "def handler(signum, frame):\n    global calls\n    calls += 1\n"
            "    print('y' * 10)\n"
            "signal.signal(signal.SIGUSR1, handler)\n"
            "main = threading.main_thread().ident\n"
            "def kick():\n    for _ in range(100):\n"
            "        time.sleep(0.01)\n        signal.pthread_kill(main, signal.SIGUSR1)\n"
            "threading.Thread(target=kick).start()\n"
            "await mcp_everything.echo(message='m' * 10_000_000)\ncalls",
            max_output_bytes=64 * MIB)
        time.sleep(1.5)
        res = self.client.finish_exec(
            exec_id, on_tool_call=lambda frame: {"ok": True, "result": text_result("x")})
        self.assertEqual(res.status, "ok", res.error)
        self.assertEqual(res.stream("stdout").count("y" * 10), int(res.result))

    def test_a_handler_that_prints_during_a_flush_keeps_every_write_whole(self):
        # Timer ticks land anywhere in the main thread's writes of 3 MB: before a send
        # takes the socket's lock, between the frames of one flush, inside a send.
        for interval in (0.0002, 0.002):
            with self.subTest(interval=interval):
                res = self.client.exec(
                    "import signal, sys\ncalls = 0\n"
                    "def handler(signum, frame):\n    global calls\n    if calls < 2000:\n"
                    "        calls += 1\n        sys.stdout.write('B' * 9000)\n"
                    "signal.signal(signal.SIGALRM, handler)\n"
                    f"signal.setitimer(signal.ITIMER_REAL, {interval}, {interval})\n"
                    "for _ in range(5):\n    sys.stdout.write('\\n' + 'A' * 3_000_000 + '\\n')\n"
                    "signal.setitimer(signal.ITIMER_REAL, 0)\ncalls",
                    max_output_bytes=200 * MIB, timeout=60)
                self.assertEqual(res.status, "ok", res.error)
                out = res.stream("stdout")
                self.assertEqual(out.count("B" * 9000), int(res.result))
                self.assertEqual([len(run) for run in re.findall("A+", out)], [3_000_000] * 5)

    def test_output_written_before_a_handler_raises_is_not_lost(self):
        # The alarm-timeout pattern: the handler raises while the write is being sent.
        for _ in range(3):
            res = self.client.exec(
                "import signal, sys, time\n"
                "def timeout(signum, frame):\n    raise TimeoutError('t')\n"
                "signal.signal(signal.SIGALRM, timeout)\ndata = 'A' * 32_000_000\n"
                "signal.setitimer(signal.ITIMER_REAL, 0.003)\n"
                "try:\n    sys.stdout.write(data)\n    time.sleep(1)\n"
                "except TimeoutError:\n    pass\nprint('END')", max_output_bytes=64 * MIB)
            self.assertEqual(res.status, "ok", res.error)
            self.assertEqual((res.done["output_bytes"], res.done["dropped_bytes"]),
                             (32_000_004, 0))
            self.assertEqual(res.stream("stdout"), "A" * 32_000_000 + "END\n")

    def test_a_handler_that_raises_during_writes_gets_only_its_own_exception(self):
        res = self.client.exec(
            "import collections, signal, sys\nclass E(Exception):\n    pass\n"
            "armed = False\nerrors = collections.Counter()\n"
            "def handler(signum, frame):\n    global armed\n    if armed:\n"
            "        armed = False\n        raise E\n"
            "signal.signal(signal.SIGALRM, handler)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)\n"
            "for _ in range(3000):\n    try:\n        armed = True\n"
            "        sys.stdout.write('x' * 20000)\n        armed = False\n"
            "    except E:\n        pass\n"
            "    except BaseException as exc:\n        armed = False\n"
            "        errors[f'{type(exc).__name__}: {exc}'] += 1\n"
            "armed = False\nsignal.setitimer(signal.ITIMER_REAL, 0)\ndict(errors)",
            max_output_bytes=100 * MIB, timeout=120)
        self.assertEqual((res.status, res.result), ("ok", "{}"), res.error)
        self.assertEqual(len(res.stream("stdout")),
                         res.done["output_bytes"] - res.done["dropped_bytes"])

    def test_a_handler_that_writes_while_the_main_thread_waits_is_held_to_the_budget(self):
        # Every write of the handler comes while the main thread is inside the capture.
        res = self.client.exec(
            "import signal, sys\ndone = False\n"
            "def handler(signum, frame):\n    global done\n"
            "    caller = sys._getframe(1)\n"
            "    while caller and caller.f_code.co_name not in ('_run', '_run_locked'):\n"
            "        caller = caller.f_back\n"
            "    if done or caller is None:\n        return\n    done = True\n"
            "    for _ in range(3_000_000):\n        sys.stdout.write('ab')\n"
            "signal.signal(signal.SIGALRM, handler)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)\n"
            "while not done:\n    sys.stdout.write('x' * 100)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)", max_output_bytes=MIB, timeout=120)
        self.assertEqual(res.status, "ok", res.error)
        with open(f"/proc/{self.proc.pid}/status") as status:
            peak_kib = int(re.search(r"VmHWM:\s+(\d+)", status.read()).group(1))
        self.assertLess(peak_kib, 100 * 1024)
        self.assertGreaterEqual(res.done["output_bytes"], 6_000_000)
        self.assertEqual(len(res.stream("stdout")),
                         res.done["output_bytes"] - res.done["dropped_bytes"])

    def test_a_handler_that_writes_bytes_inside_a_bytes_write_does_not_hang(self):
        res = self.client.exec(
            "import signal, sys\nbusy = False\ncalls = 0\n"
            "def handler(signum, frame):\n    global busy, calls\n    if busy:\n        return\n"
            "    busy = True\n    calls += 1\n    sys.stdout.buffer.write(b'H')\n    busy = False\n"
            "signal.signal(signal.SIGALRM, handler)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)\n"
            "for _ in range(100_000):\n    sys.stdout.buffer.write(b'm')\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)\ncalls", timeout=60)
        self.assertEqual(res.status, "ok", res.error)
        out = res.stream("stdout")
        self.assertEqual((out.count("m"), out.count("H")), (100_000, int(res.result)))

    def test_a_display_from_a_handler_inside_a_write_is_shown_or_counted(self):
        res = self.client.exec(
            # Writes go on until the handler has run five times, however slowly the
            # machine delivers the ticks; the deadline only keeps a broken runner finite.
            "import signal, sys, time\ncalls = []\n"
            "def handler(signum, frame):\n    if len(calls) < 5:\n"
            "        calls.append(1)\n        display({'text/plain': f'D{len(calls)}'})\n"
            "signal.signal(signal.SIGALRM, handler)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)\n"
            "deadline = time.monotonic() + 30\n"
            "while len(calls) < 5 and time.monotonic() < deadline:\n"
            "    sys.stdout.write('x' * 1000)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)\nlen(calls)",
            max_output_bytes=1000, timeout=60)
        self.assertEqual((res.status, res.result), ("ok", "5"), res.error)
        self.assertEqual((res.done["displays"], res.done["displays_dropped"]), (5, 0))

    def test_a_handler_that_raises_inside_the_budget_cut_leaves_the_counters_true(self):
        res = self.client.exec(
            "import signal, sys\nclass E(Exception):\n    pass\n"
            "def handler(signum, frame):\n"
            "    if frame.f_code.co_name == '_write_locked':\n        raise E\n"
            "signal.signal(signal.SIGALRM, handler)\nbig = 'x' * 30_000_000\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)\n"
            "try:\n    sys.stdout.write(big)\nexcept E:\n    pass\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)", max_output_bytes=20_000_000, timeout=60)
        self.assertEqual(res.status, "ok", res.error)
        self.assertEqual(len(res.stream("stdout")),
                         res.done["output_bytes"] - res.done["dropped_bytes"])

    def test_a_thread_stack_size_of_user_code_leaves_the_runner_its_threads(self):
        # Every thread of the default size would fail to start; the runner's start anyway:
        # the flusher (the main thread does not send while the handler is installed) and
        # the interrupt's resender.
        self.client.exec("import threading\nthreading.stack_size(1 << 44)")
        res = self.client.exec(
            "import signal, sys\nclass E(Exception):\n    pass\n"
            "def handler(signum, frame):\n"
            "    if frame.f_code.co_name == 'send_body':\n        raise E\n"
            "signal.signal(signal.SIGALRM, handler)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)\n"
            "for _ in range(30):\n    try:\n        sys.stdout.write('x' * 1_000_000)\n"
            "    except E:\n        pass\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)", max_output_bytes=64 * MIB, timeout=60)
        self.assertEqual(res.status, "ok", res.error)
        self.assertEqual(len(res.stream("stdout")), res.done["output_bytes"])
        exec_id = self.client.start_exec("while True:\n    print('p' * 100)")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        self.assertEqual(self.client.finish_exec(exec_id).status, "interrupted")
        self.assertEqual(self.client.exec("1 + 1").result, "2")

    FORK_IN_A_HANDLER = (
        "import os, signal, threading, time\nkids = []\n"
        "def handler(signum, frame):\n    pid = os.fork()\n"
        "    if pid:\n        kids.append(pid)\n"
        "signal.signal(signal.SIGUSR1, handler)\n"
        "main = threading.main_thread().ident\n"
        "def kick():\n    time.sleep(0.3)\n    signal.pthread_kill(main, signal.SIGUSR1)\n"
        "threading.Thread(target=kick).start()\n")
    CHILD_EXITED = (
        "def exited(pid):\n    for _ in range(100):\n"
        "        done, status = os.waitpid(pid, os.WNOHANG)\n"
        "        if done:\n            return os.waitstatus_to_exitcode(status)\n"
        "        time.sleep(0.05)\n"
        "[exited(pid) for pid in kids]")

    def test_a_child_forked_while_the_main_thread_waits_for_the_flusher_exits(self):
        # The client reads nothing for a second: the main thread waits for the flusher
        # when the handler forks, and the child must not wait for a flusher it lacks.
        exec_id = self.client.start_exec(
            self.FORK_IN_A_HANDLER + "for _ in range(40):\n    print('x' * 200_000)\n",
            max_output_bytes=64 * MIB)
        time.sleep(1.0)
        self.assertEqual(self.client.finish_exec(exec_id).status, "ok")
        self.assertEqual(self.client.exec(self.CHILD_EXITED).result, "[0]")

    def test_a_child_forked_while_the_main_thread_waits_for_the_output_lock_exits(self):
        # A thread of user code holds the output lock while it sends (the client reads
        # nothing for a second) when the handler forks: the child lacks that thread.
        exec_id = self.client.start_exec(
            self.FORK_IN_A_HANDLER + "import sys\n"
            "def spew():\n    for _ in range(40):\n        sys.stdout.write('x' * 200_000)\n"
            "threading.Thread(target=spew).start()\ntime.sleep(0.1)\n"
            "for _ in range(100):\n    print('m')\n", max_output_bytes=64 * MIB)
        time.sleep(1.0)
        self.assertEqual(self.client.finish_exec(exec_id).status, "ok")
        self.assertEqual(self.client.exec(self.CHILD_EXITED).result, "[0]")

    def test_a_child_forked_inside_a_tool_call_send_sends_nothing(self):
        # The handler forks while the main thread is inside the send of a 10 MB frame:
        # the parent's frame arrives whole, and the child's rest of it goes nowhere.
        self.client.set_catalog(CATALOG)
        exec_id = self.client.start_exec(
            self.FORK_IN_A_HANDLER + "await mcp_everything.echo(message='m' * 10_000_000)\n")
        time.sleep(1.0)
        res = self.client.finish_exec(
            exec_id, on_tool_call=lambda frame: {"ok": True, "result": text_result("x")})
        self.assertEqual((res.status, len(res.calls)), ("ok", 1), res.error)
        self.assertEqual(len(res.calls[0]["arguments"]["message"]), 10_000_000)
        self.assertEqual(self.client.exec(self.CHILD_EXITED).result, "[0]")

    def test_a_child_forked_while_the_main_thread_waits_for_the_socket_exits(self):
        # A thread of user code sends a 10 MB tool call (the client reads nothing for a
        # second) when the handler forks inside the main thread's wait for the socket.
        # The child's call fails, and the child, going on in the cell's event loop, must
        # not take the wakeups of the parent's, which waits for its own call's result.
        # The cell ends once the thread's call is answered too (in the child, where the
        # thread does not exist, at once).
        self.client.set_catalog(CATALOG)
        exec_id = self.client.start_exec(
            self.FORK_IN_A_HANDLER.replace("kids.append(pid)\n",
                                           "kids.append(pid)\n    else:\n        time.sleep(0.2)\n")
            + "import asyncio\n"
            "def call():\n    asyncio.run(mcp_everything.echo(message='m' * 10_000_000))\n"
            "caller = threading.Thread(target=call)\ncaller.start()\ntime.sleep(0.1)\n"
            "await mcp_everything.echo(message='m')\n"
            "while caller.is_alive():\n    await asyncio.sleep(0.05)\n")
        time.sleep(1.0)
        res = self.client.finish_exec(
            exec_id, on_tool_call=lambda frame: {"ok": True, "result": text_result("x")})
        self.assertEqual((res.status, len(res.calls)), ("ok", 2), res.error)
        self.assertEqual(self.client.exec(self.CHILD_EXITED).result, "[0]")

    def test_a_child_forked_on_a_thread_of_the_runner_exits_at_once(self):
        # A finalizer of user code runs wherever the collector does, the runner's
        # connections thread included, and forks there: that child must neither go on
        # serving sandboxd's connections (taking a reconnect, reading its frames) nor stay.
        self.client.exec(
            "import gc, os, threading, time\nMAIN = threading.main_thread().ident\n"
            "PARENT = os.getpid()\nkids = []\n"
            "class Cycle:\n    def __init__(self):\n        self.me = self\n"
            "    def __del__(self):\n        if os.getpid() != PARENT:\n            return\n"
            "        if threading.get_ident() == MAIN:\n"
            "            Cycle()\n            return\n"
            "        pid = os.fork()\n        if pid:\n            kids.append(pid)\n"
            "gc.set_threshold(1)\nCycle()")
        for n in range(5):
            self.client.send({"type": "ping", "id": n})
            self.client.expect("pong")
        client = self.client
        for _ in range(3):
            client.close()
            client = self.connect()
            self.assertEqual(client.expect("ready")["pid"], self.proc.pid)
            self.assertEqual(client.exec("1 + 1").result, "2")
        res = client.exec("gc.set_threshold(700)\n" + self.CHILD_EXITED)
        self.assertRegex(res.result, r"^\[0(, 0)*\]$")

    def test_a_thread_a_child_starts_is_not_taken_for_one_of_the_runner(self):
        # The child's new thread may get the ident of a runner thread of the parent; its
        # fork is user code's and runs.
        res = self.client.exec(
            "import os, threading\nread, write = os.pipe()\npid = os.fork()\n"
            "if pid == 0:\n    statuses = []\n"
            "    def fork_and_wait():\n        grandchild = os.fork()\n"
            "        if grandchild == 0:\n            os._exit(7)\n"
            "        statuses.append(os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1]))\n"
            "    for _ in range(4):\n        thread = threading.Thread(target=fork_and_wait)\n"
            "        thread.start()\n        thread.join()\n"
            "    os.write(write, repr(statuses).encode())\n    os._exit(0)\n"
            "os.close(write)\nos.waitpid(pid, 0)\nos.read(read, 100).decode()")
        self.assertEqual(res.result, "'[7, 7, 7, 7]'", res.error)

    def test_children_of_user_threads_that_print_while_cells_print_exit(self):
        # A thread of the parent may hold the output lock's underlying lock, not yet
        # recorded as its owner, at fork time: the child must still get the lock.
        self.client.exec(
            "import os, threading\nstop = False\n"
            "def fork_and_wait():\n    while not stop:\n        pid = os.fork()\n"
            "        if pid == 0:\n            print('child' * 100)\n            os._exit(0)\n"
            "        os.waitpid(pid, 0)\n"
            "threads = [threading.Thread(target=fork_and_wait) for _ in range(3)]\n"
            "for thread in threads:\n    thread.start()")
        for _ in range(30):
            self.client.exec("for _ in range(100):\n    print('x' * 50)")
        res = self.client.exec("stop = True\nfor thread in threads:\n    thread.join(10)\n"
                               "[thread.is_alive() for thread in threads]", timeout=40)
        self.assertEqual(res.result, "[False, False, False]")

    def test_a_reset_gives_sigint_back_to_the_runner(self):
        for handler in ("lambda signum, frame: None", "signal.default_int_handler",
                        "signal.SIG_DFL", "signal.SIG_IGN"):
            with self.subTest(handler):
                self.client.exec(f"import signal\nsignal.signal(signal.SIGINT, {handler})")
                self.client.reset()
                exec_id = self.client.start_exec("print('started')\nwhile True:\n    pass")
                self.client.expect("output")
                self.client.send({"type": "interrupt", "id": exec_id})
                self.assertEqual(self.client.finish_exec(exec_id).status, "interrupted")

    def test_a_handler_is_told_apart_without_its_own_methods(self):
        # pause() must not call __eq__ or __hash__ of a handler user code installed
        self.client.exec(
            "import signal\nclass H:\n    def __call__(self, signum, frame):\n        pass\n"
            "    def __eq__(self, other):\n        raise ValueError('eq')\n"
            "    def __hash__(self):\n        raise ValueError('hash')\n"
            "signal.signal(signal.SIGUSR1, H())")
        self.assertEqual(self.client.exec("1 + 1").result, "2")
        self.assertEqual(self.client.exec("type(signal.getsignal(signal.SIGUSR1)).__name__")
                         .result, "'H'")

    def test_a_handler_of_its_own_is_left_alone(self):
        res = self.client.exec(
            "import os, signal\nseen = []\n"
            "signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))\n"
            "os.kill(os.getpid(), signal.SIGUSR2)\nimport time\ntime.sleep(0.05)\n"
            "(seen, signal.getsignal(signal.SIGUSR2).__name__)")
        self.assertEqual(res.result, f"([{int(signal.SIGUSR2)}], '<lambda>')")
        self.assertEqual(self.client.exec("signal.getsignal(signal.SIGUSR2).__name__").result,
                         "'<lambda>'")


class HandlerError(Exception):
    """What a signal handler of user code raises, here at a chosen line of the runner."""


class FlusherStartTest(unittest.TestCase):
    """OutputCapture in this process, with a handler of user code installed (user_handlers)
    and its exception raised where Python could run the handler: as the flusher thread is
    started. The main thread must still leave every send to a flusher: a handler that
    raises inside a send of the main thread's own cuts the frame, or sends it twice."""

    def sends_of(self, cut):
        senders = []

        class Connection:
            def send(self, frame):
                senders.append(threading.get_ident())
                return True

        class Capture(output_module.OutputCapture):
            def _start_flusher(self):
                if cut == "before the start":
                    cut_here = self._cuts_left > 0
                    self._cuts_left -= 1
                    if cut_here:
                        raise HandlerError
                started = super()._start_flusher()
                if cut == "after the start" and self._cuts_left > 0:
                    self._cuts_left -= 1
                    raise HandlerError
                return started

        capture = Capture()
        capture._cuts_left = 1
        capture.user_handlers = lambda: True
        capture.begin(Connection(), "exec-1", 10 * MIB)
        with self.assertRaises(HandlerError):
            capture.write("stdout", "x")
        for _ in range(8):                   # over OUTPUT_FLUSH_BYTES: the writer waits
            capture.write("stdout", "y" * 4096)
        sent = list(senders)
        capture.user_handlers = lambda: False
        capture.finish()
        return sent

    def test_a_handler_that_raises_as_the_flusher_starts_leaves_no_send_to_the_main_thread(self):
        main = threading.get_ident()
        for cut in ("before the start", "after the start"):
            with self.subTest(cut=cut):
                senders = self.sends_of(cut)
                self.assertTrue(senders, "nothing was sent while the writer waited")
                self.assertNotIn(main, senders)


if __name__ == "__main__":
    unittest.main()
