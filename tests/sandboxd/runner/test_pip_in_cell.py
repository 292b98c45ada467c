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
import unittest
import zipfile
from pathlib import Path

from harness import import_runner_module

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


class PipInCellTest(unittest.TestCase):
    def setUp(self):
        self.pip_in_cell = import_runner_module("pip_in_cell")
        self.dir = tempfile.TemporaryDirectory()
        cli = Path(self.dir.name, "pip", "_internal", "cli")
        utils = cli.parent / "utils"
        cli.mkdir(parents=True)
        utils.mkdir()
        for package in (cli.parents[1], cli.parent, cli, utils):
            (package / "__init__.py").write_text("")
        (utils / "logging.py").write_text(PIP_LOGGING)
        (cli / "main.py").write_text(PIP_MAIN)
        (cli / "base_command.py").write_text(BASE_COMMAND)
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


if __name__ == "__main__":
    unittest.main()
