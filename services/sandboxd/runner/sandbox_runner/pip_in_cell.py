"""pip's main() called in a cell leaves the session's logging as it found it.

On the wasm tier pip runs in the cell (Pyodide starts no process; docs/wasm-tier.md,
"Python packages"), and any tier's code may call it so. pip's main() configures logging
for a process of its own: it puts its handlers on the root logger and sets the root's
level, and every later cell's logging would go through them. install() puts a finder on
sys.meta_path that wraps `pip._internal.cli.main.main` as that module is executed, so
every entry point that reaches it (`pip.main`, `python -m pip` run in-process, the module's
own name) puts the root logger's handlers and level back when pip returns, and closes the
handlers pip added. Nothing is imported until pip is."""

import sys

_PIP_MAIN = "pip._internal.cli.main"


def keeping_logging(main):
    """`main`, leaving the root logger's handlers and level as it found them."""

    def main_keeping_logging(*args, **kwargs):
        import logging                        # pip has imported it already

        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            return main(*args, **kwargs)
        finally:
            added = [h for h in root.handlers if h not in handlers]
            root.handlers[:] = handlers
            root.setLevel(level)
            for h in added:
                h.close()

    main_keeping_logging.__wrapped__ = main
    main_keeping_logging.__doc__ = main.__doc__
    return main_keeping_logging


class PipMainFinder:
    """Finds nothing itself: for pip's main module, the spec the other finders give, with
    its loader wrapping `main` once the module has run."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != _PIP_MAIN:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, PipMainFinder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            if callable(getattr(module, "main", None)):
                module.main = keeping_logging(module.main)

        loader.exec_module = exec_and_wrap    # this module's own loader object
        return spec


def install():
    """Puts the finder first on sys.meta_path, once."""
    if not any(isinstance(f, PipMainFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PipMainFinder())
