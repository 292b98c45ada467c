"""pip's main() called in a cell leaves the session's logging as it found it (pip_in_cell):
pip sets up logging for a process of its own, which a cell is not. Here a stand-in pip
package on sys.path does what pip's main() does to the root logger; the wasm tier's test
(python_wasm.test.mjs) runs the real one."""

import importlib
import logging
import logging.handlers
import os
import sys
import signal
import tempfile
import threading
import time
import unittest
import zipfile
from pathlib import Path

from harness import RunnerTestCase, import_runner_module

# pip's handler classes live in pip._internal.utils.logging; `fail_close`, when a test
# sets it, makes closing one fail as a file handler's flush on a full disk does.
PIP_LOGGING = '''
import logging

class PipHandler(logging.StreamHandler):
    closed = False
    fail_close = False

    def close(self):
        PipHandler.closed = True
        super().close()
        if PipHandler.fail_close:
            raise OSError(28, "No space left on device")
'''

PIP_MAIN = '''
def main(args=None):
    """pip's main."""
    import logging.config

    # As pip's setup_logging: dictConfig first closes every handler the process has.
    logging.config.dictConfig({
        "version": 1, "disable_existing_loggers": False,
        "handlers": {"pip": {"()": "pip._internal.utils.logging.PipHandler"}},
        "root": {"level": "DEBUG", "handlers": ["pip"]}})
    if args == ["fail"]:
        raise SystemExit(2)
    return 0
'''

# A command, as pip's Command.main: its _main sets logging up as cli.main's does, and it
# ends with logging.shutdown(), which flushes and closes every handler in the registry.
# `started` and `release`, when a test sets them, hold it while its logging is pip's.
BASE_COMMAND = '''
import logging

started = release = None
during = None

class Command:
    def main(self, args):
        """A command's main."""
        import logging.config
        try:
            logging.config.dictConfig({
                "version": 1, "disable_existing_loggers": False,
                "handlers": {"pip": {"()": "pip._internal.utils.logging.PipHandler"}},
                "root": {"level": "DEBUG", "handlers": ["pip"]}})
            if during is not None:
                during()
            if started is not None:
                started.set()
                release.wait(10)
            return 0
        finally:
            logging.shutdown()
'''


def write_stand_in_pip(directory):
    """The stand-in pip package, in `directory`."""
    cli = Path(directory, "pip", "_internal", "cli")
    utils = cli.parent / "utils"
    cli.mkdir(parents=True)
    utils.mkdir()
    for package in (cli.parents[1], cli.parent, cli, utils):
        (package / "__init__.py").write_text("")
    (utils / "logging.py").write_text(PIP_LOGGING)
    (cli / "main.py").write_text(PIP_MAIN)
    (cli / "base_command.py").write_text(BASE_COMMAND)


class PipInCellTest(unittest.TestCase):
    def setUp(self):
        self.pip_in_cell = import_runner_module("pip_in_cell")
        self.dir = tempfile.TemporaryDirectory()
        write_stand_in_pip(self.dir.name)
        self.saved_path, self.saved_meta_path = list(sys.path), list(sys.meta_path)
        self.saved_modules = {n: m for n, m in sys.modules.items() if n == "pip" or n.startswith("pip.")}
        for name in self.saved_modules:
            del sys.modules[name]
        sys.path.insert(0, self.dir.name)
        importlib.invalidate_caches()
        self.root = logging.getLogger()
        self.saved_root = (list(self.root.handlers), self.root.level)

    def tearDown(self):
        for name in [n for n in sys.modules if n == "pip" or n.startswith("pip.")]:
            del sys.modules[name]
        sys.modules.update(self.saved_modules)
        sys.path[:], sys.meta_path[:] = self.saved_path, self.saved_meta_path
        self.root.handlers[:] = self.saved_root[0]
        self.root.setLevel(self.saved_root[1])
        self.dir.cleanup()

    def test_the_root_logger_is_put_back_and_pip_handlers_closed(self):
        mine = logging.StreamHandler()
        self.root.handlers[:] = [mine]
        self.root.setLevel(logging.WARNING)
        self.pip_in_cell.install()
        self.pip_in_cell.install()
        self.assertEqual(sum(isinstance(f, self.pip_in_cell.PipMainFinder) for f in sys.meta_path), 1)
        from pip._internal.cli.main import main
        self.assertEqual(main.__doc__, "pip's main.")
        self.assertEqual(main(["list"]), 0)
        self.assertEqual(self.root.handlers, [mine])
        self.assertEqual(self.root.level, logging.WARNING)
        self.assertTrue(sys.modules["pip._internal.utils.logging"].PipHandler.closed)
        with self.assertRaises(SystemExit):
            main(["fail"])
        self.assertEqual(self.root.handlers, [mine])

    def test_the_sessions_handlers_stay_open(self):
        # A file handler that dictConfig closed would drop every later record (mode "w"
        # does not reopen), and a closed MemoryHandler forgets its target.
        log = Path(self.dir.name, "app.log")
        app = logging.getLogger("pip-in-cell-test.app")
        app.setLevel(logging.INFO)
        app.propagate = False
        file = logging.FileHandler(log, mode="w")
        target = logging.StreamHandler()
        memory = logging.handlers.MemoryHandler(100, target=target)
        app.handlers[:] = [file, memory]
        self.addCleanup(file.close)
        self.addCleanup(memory.close)
        app.info("before pip")
        self.pip_in_cell.install()
        from pip._internal.cli.main import main
        self.assertEqual(main(["list"]), 0)
        app.info("after pip")
        file.flush()
        self.assertEqual(log.read_text(), "before pip\nafter pip\n")
        self.assertIs(memory.target, target)
        self.assertIn(file, [wr() for wr in logging._handlerList])

    def test_a_command_called_directly_leaves_the_sessions_logging(self):
        log = Path(self.dir.name, "session.log")
        mine = logging.FileHandler(log, mode="w")
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.root.setLevel(logging.WARNING)
        self.pip_in_cell.install()
        from pip._internal.cli.base_command import Command
        self.assertEqual(Command.main.__doc__, "A command's main.")
        self.assertEqual(Command().main(["help"]), 0)
        self.assertEqual(self.root.handlers, [mine])
        self.assertEqual(self.root.level, logging.WARNING)
        logging.warning("after pip")
        mine.flush()
        self.assertEqual(log.read_text(), "after pip\n")

    def pip_held_in_a_thread(self):
        """A command running in another thread, held while its logging is pip's; returns
        the stand-in base_command module and a function that lets it finish."""
        self.pip_in_cell.install()
        import pip._internal.cli.base_command as base_command
        base_command.started, base_command.release = threading.Event(), threading.Event()
        pip = threading.Thread(target=lambda: base_command.Command().main(["list"]))
        pip.start()
        self.assertTrue(base_command.started.wait(10))

        def finish():
            base_command.release.set()
            pip.join(10)
        return base_command, finish

    def test_a_handler_another_thread_adds_meanwhile_is_kept(self):
        mine = logging.StreamHandler()
        self.root.handlers[:] = [mine]
        _, finish = self.pip_held_in_a_thread()
        theirs = logging.StreamHandler()
        self.root.addHandler(theirs)
        finish()
        self.assertEqual(self.root.handlers, [mine, theirs])
        self.assertTrue(sys.modules["pip._internal.utils.logging"].PipHandler.closed)

    def test_a_named_handler_another_thread_adds_meanwhile_is_kept(self):
        _, finish = self.pip_held_in_a_thread()
        theirs = logging.StreamHandler()
        theirs.set_name("another thread's")
        self.root.addHandler(theirs)
        finish()
        self.assertIn(theirs, self.root.handlers)

    def test_a_child_forked_while_pip_runs_can_run_pip(self):
        base_command, finish = self.pip_held_in_a_thread()
        child = os.fork()
        if child == 0:                                  # the child: pip, bounded by an alarm
            signal.alarm(10)
            base_command.started = None
            os._exit(base_command.Command().main(["list"]) + 7)
        finish()
        _, status = os.waitpid(child, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 7)

    def test_pip_in_a_child_forked_inside_pip_keeps_the_childs_logging(self):
        self.pip_in_cell.install()
        import pip._internal.cli.base_command as base_command
        forked = []
        base_command.during = lambda: forked.append(os.fork())
        base_command.Command().main(["list"])
        if forked[0] == 0:                              # the child, out of the pip it forked in
            code = 3
            try:
                signal.alarm(10)
                base_command.during = None
                mine = logging.StreamHandler()
                self.root.handlers[:] = [mine]
                for _ in range(2):
                    base_command.Command().main(["list"])
                code = 7 if self.root.handlers == [mine] else 4
            finally:
                os._exit(code)
        _, status = os.waitpid(forked[0], 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 7)

    def test_a_pip_handler_failing_to_close_leaves_the_session_its_handlers(self):
        log = Path(self.dir.name, "session.log")
        mine = logging.FileHandler(log, mode="w")
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.pip_in_cell.install()
        import pip._internal.utils.logging as pip_logging
        pip_logging.PipHandler.fail_close = True
        from pip._internal.cli.main import main
        self.assertEqual(main(["list"]), 0)
        self.assertEqual(self.root.handlers, [mine])
        self.assertIn(mine, [wr() for wr in logging._handlerList])

    def test_a_handler_that_cannot_be_compared_is_kept(self):
        class Incomparable(logging.StreamHandler):
            __hash__ = logging.StreamHandler.__hash__

            def __eq__(self, other):
                raise RuntimeError("compared")

        mine = Incomparable()
        self.root.handlers[:] = [mine]
        self.pip_in_cell.install()
        from pip._internal.cli.main import main
        self.assertEqual(main(["list"]), 0)
        self.assertEqual(len(self.root.handlers), 1)
        self.assertIs(self.root.handlers[0], mine)

    def test_a_handler_only_named_like_pips_is_the_sessions(self):
        # Told by pip's own classes: one whose module merely says pip's is the session's.
        class Lookalike(logging.StreamHandler):
            pass

        Lookalike.__module__, Lookalike.__name__ = "pip._internal.utils.logging", "PipHandler"
        _, finish = self.pip_held_in_a_thread()
        theirs = Lookalike()
        self.root.addHandler(theirs)
        finish()
        self.assertIn(theirs, self.root.handlers)

    def test_another_module_of_the_same_loader_is_left_alone(self):
        # One zipimporter loads every module of its archive: a `main` elsewhere in it is
        # not pip's, and the importer itself is not changed.
        archive = Path(self.dir.name, "tools.zip")
        with zipfile.ZipFile(archive, "w") as z:
            for name in ("pip/__init__.py", "pip/_internal/__init__.py", "pip/_internal/cli/__init__.py"):
                z.writestr("zipped/" + name, "")
            z.writestr("zipped/pip/_internal/cli/main.py", "def main(args=None):\n    return 0\n")
            z.writestr("zipped/pip_in_cell_test_tool.py", "class main:\n    VERSION = '1.0'\n")
        sys.path.remove(self.dir.name)
        sys.path.insert(0, str(archive / "zipped"))
        self.addCleanup(sys.modules.pop, "pip_in_cell_test_tool", None)
        importlib.invalidate_caches()
        self.pip_in_cell.install()
        import pip._internal.cli.main as pip_main
        self.assertTrue(hasattr(pip_main.main, "__wrapped__"))
        import pip_in_cell_test_tool
        self.assertEqual(pip_in_cell_test_tool.main.VERSION, "1.0")
        importer = sys.path_importer_cache[str(archive / "zipped")]
        self.assertNotIn("exec_module", vars(importer))
        for _ in range(3):
            importlib.reload(pip_main)
        self.assertFalse(hasattr(pip_main.main.__wrapped__, "__wrapped__"))

    def test_without_the_finder_pip_keeps_its_logging(self):
        # What install() prevents: the stand-in does change the root logger.
        from pip._internal.cli.main import main
        main(["list"])
        self.assertEqual([type(h).__name__ for h in self.root.handlers], ["PipHandler"])
        self.assertEqual(self.root.level, logging.DEBUG)

    def test_other_modules_are_left_to_the_other_finders(self):
        self.pip_in_cell.install()
        finder = next(f for f in sys.meta_path if isinstance(f, self.pip_in_cell.PipMainFinder))
        self.assertIsNone(finder.find_spec("pip._internal.cli", None))
        self.assertIsNone(finder.find_spec("json", None))

    def raising_in_a_library_call(self, is_target):
        """A trace hook that raises KeyboardInterrupt as the first library function for which
        is_target(its frame) holds starts, when called straight from pip_in_cell's code (as
        an interrupt landing there, or a signal handler of user code raising). Returns
        [hook, the names of the calls seen]."""
        common = import_runner_module("common")
        seen = []

        def hook(frame, event, arg):
            caller = frame.f_back
            if (event == "call" and caller is not None and
                    caller.f_code.co_filename == self.pip_in_cell.__file__ and
                    not common.is_runner_file(frame.f_code.co_filename)):
                seen.append(frame.f_code.co_name)
                if is_target(frame):
                    raise KeyboardInterrupt
        return hook, seen

    def test_an_exception_while_pip_is_set_up_or_ended_leaves_no_owner(self):
        # Raised at each library call the wrapper makes before pip's main starts, in turn,
        # and at the root logger's setLevel as the session's logging is put back: no
        # thread stays pip's owner, and a later pip puts the session's logging back.
        mine = logging.StreamHandler()
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.root.setLevel(logging.WARNING)
        self.pip_in_cell.install()
        from pip._internal.cli.main import main
        targets = [lambda frame, n=n: len(seen) == n + 1 and "main" not in seen for n in range(20)]
        targets.append(lambda frame: frame.f_code.co_name == "setLevel")
        raised = 0
        for is_target in targets:
            hook, seen = self.raising_in_a_library_call(is_target)
            sys.settrace(hook)
            try:
                main(["list"])
            except KeyboardInterrupt:
                raised += 1
            finally:
                sys.settrace(None)
            self.assertIsNone(self.pip_in_cell._owner, seen)
            self.assertEqual(main(["list"]), 0)
            self.assertEqual(self.root.handlers, [mine], seen)
            self.assertIn(mine, [wr() for wr in logging._handlerList])
            if "setLevel" not in seen:          # else the level is the one left unset
                self.assertEqual(self.root.level, logging.WARNING)
        self.assertGreaterEqual(raised, 2)

    def test_the_runners_interrupt_waits_while_the_sessions_logging_is_set_aside_or_put_back(self):
        # Every library call the wrapper makes around pip's main (setting the session's
        # logging aside, putting it back) is inside common.uninterruptible(), which the
        # runner's SIGINT handler honours on the main thread.
        common = import_runner_module("common")
        interrupts = import_runner_module("interrupts")
        controller = interrupts.InterruptController(threading.Lock())
        here = sys._getframe()
        self.assertFalse(controller._cannot_raise_in(here))
        with common.uninterruptible():
            self.assertTrue(controller._cannot_raise_in(here))
        self.assertFalse(controller._cannot_raise_in(here))
        self.pip_in_cell.install()
        from pip._internal.cli.main import main
        outside = []

        def note(frame):                        # raises nothing
            if not common.in_uninterruptible():
                outside.append(frame.f_code.co_name)

        hook, seen = self.raising_in_a_library_call(note)
        sys.settrace(hook)
        try:
            self.assertEqual(main(["list"]), 0)
        finally:
            sys.settrace(None)
        self.assertIn("setLevel", seen)
        self.assertEqual(outside, ["main"])     # pip's main itself is user code

    def test_a_child_forked_by_another_thread_while_pip_runs_has_the_sessions_logging(self):
        mine = logging.StreamHandler()
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.root.setLevel(logging.WARNING)
        _, finish = self.pip_held_in_a_thread()
        self.assertEqual(self.root.level, logging.DEBUG)     # pip's, meanwhile
        child = os.fork()
        if child == 0:
            code = 3
            try:
                code = (4 if self.root.handlers != [mine] else
                        5 if self.root.level != logging.WARNING else
                        6 if mine not in [wr() for wr in logging._handlerList] else 7)
            finally:
                os._exit(code)
        finish()
        _, status = os.waitpid(child, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 7)

    def test_a_session_handler_named_as_pips_keeps_its_name(self):
        mine = logging.StreamHandler()
        mine.set_name("pip")                              # the stand-in's handler's name
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.pip_in_cell.install()
        from pip._internal.cli.main import main
        self.assertEqual(main(["list"]), 0)
        self.assertIs(logging._handlers.get("pip"), mine)
        self.assertEqual(self.root.handlers, [mine])

    def test_a_pip_handler_raising_as_it_closes_leaves_the_registry_put_back(self):
        mine = logging.StreamHandler()
        mine.set_name("pip")
        self.addCleanup(mine.close)
        self.root.handlers[:] = [mine]
        self.pip_in_cell.install()
        import pip._internal.utils.logging as pip_logging

        def close(handler):
            logging.Handler.close(handler)
            raise KeyboardInterrupt

        pip_logging.PipHandler.close = close
        from pip._internal.cli.main import main
        with self.assertRaises(KeyboardInterrupt):
            main(["list"])
        self.assertEqual(self.root.handlers, [mine])
        self.assertIs(logging._handlers.get("pip"), mine)
        self.assertIn(mine, [wr() for wr in logging._handlerList])

    def test_a_session_handler_another_thread_removes_and_closes_meanwhile_stays_out(self):
        mine, closed_before = logging.StreamHandler(), logging.StreamHandler()
        closed_before.close()                   # closed, and on the root logger all along
        self.root.handlers[:] = [mine, closed_before]
        _, finish = self.pip_held_in_a_thread()
        self.root.removeHandler(mine)
        mine.close()
        finish()
        self.assertEqual(self.root.handlers, [closed_before])


class PipInCellRunnerTest(RunnerTestCase):
    def test_a_cell_waiting_for_another_threads_pip_is_interrupted(self):
        stand_in = tempfile.TemporaryDirectory()
        self.addCleanup(stand_in.cleanup)
        write_stand_in_pip(stand_in.name)
        self.assertOk(self.client.exec(
            f"import sys, threading\nsys.path.insert(0, {stand_in.name!r})\n"
            "import pip._internal.cli.base_command as base_command\n"
            "base_command.started, base_command.release = threading.Event(), threading.Event()\n"
            "held = threading.Thread(target=lambda: base_command.Command().main(['list']),\n"
            "                        daemon=True)\n"
            "held.start()\n"
            "assert base_command.started.wait(5)"))
        exec_id = self.client.start_exec("print('waiting')\nbase_command.Command().main(['list'])")
        self.client.expect("output")
        time.sleep(0.1)
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=2)
        self.assertEqual(res.status, "interrupted", res.error)
        res = self.client.exec("base_command.started = None\nbase_command.release.set()\n"
                               "held.join(5)\nbase_command.Command().main(['list'])")
        self.assertEqual(res.result, "0", res.error)

    def test_an_uninterruptible_section_user_code_leaves_open_ends_with_its_cell(self):
        # The runner's modules are importable in the session: a section entered and never
        # left holds off interrupts for that cell at most.
        self.assertOk(self.client.exec(
            "from sandbox_runner.common import uninterruptible\nuninterruptible().__enter__()"))
        exec_id = self.client.start_exec("print('spinning')\nwhile True:\n    pass")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=2)
        self.assertEqual(res.status, "interrupted", res.error)


if __name__ == "__main__":
    unittest.main()
