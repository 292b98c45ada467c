"""pip's main() called in a cell leaves the session's logging as it found it.

On the wasm tier pip runs in the cell (Pyodide starts no process; docs/wasm-tier.md,
"Python packages"), and any tier's code may call it so. pip's main() configures logging
for a process of its own: its dictConfig closes every handler the process has made (a
file handler then drops every later record), it puts its handlers on the root logger and
sets the root's level, and every later cell's logging would go through them. install()
puts a finder on sys.meta_path that wraps `pip._internal.cli.main.main` as that module is
executed, so every entry point that reaches it (`pip.main`, `python -m pip` run
in-process, the module's own name) runs with the session's handlers out of the registry
pip closes, puts the root logger's handlers and level back when pip returns, and closes
the handlers pip added. Nothing is imported until pip is."""

import sys

_PIP_MAIN = "pip._internal.cli.main"


def keeping_logging(main):
    """`main`, leaving the process's handlers open and the root logger's handlers and level
    as it found them."""

    def main_keeping_logging(*args, **kwargs):
        import logging                        # pip has imported it already

        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        # logging.config's dictConfig closes every handler in this registry, on any logger.
        with logging._lock:
            listed, named = list(logging._handlerList), dict(logging._handlers)
            del logging._handlerList[:]
        try:
            return main(*args, **kwargs)
        finally:
            added = [h for h in root.handlers if h not in handlers]
            root.handlers[:] = handlers
            root.setLevel(level)
            for h in added:
                h.close()
            with logging._lock:
                logging._handlerList[:0] = listed
                for name, h in named.items():
                    logging._handlers.setdefault(name, h)

    main_keeping_logging.__wrapped__ = main
    main_keeping_logging.__doc__ = main.__doc__
    return main_keeping_logging


class _WrappingLoader:
    """The loader of pip's main module, wrapping `main` once the module has run. A loader of
    its own: the one it stands for may load other modules too (a zipimporter loads a whole
    archive's), and is left as it is."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        if callable(getattr(module, "main", None)):
            module.main = keeping_logging(module.main)

    def __getattr__(self, name):              # get_code, get_source, resources...
        if name == "_loader":
            raise AttributeError(name)
        return getattr(self._loader, name)


class PipMainFinder:
    """Finds nothing itself: for pip's main module, the spec the other finders give, with
    a loader that wraps `main` once the module has run."""

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
        if loader is None or not hasattr(loader, "exec_module") or not hasattr(loader, "create_module"):
            return spec
        spec.loader = _WrappingLoader(loader)
        return spec


def install():
    """Puts the finder first on sys.meta_path, once."""
    if not any(isinstance(f, PipMainFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PipMainFinder())
