"""pip's main() called in a cell leaves the session's logging as it found it.

On the wasm tier pip runs in the cell (Pyodide starts no process; docs/wasm-tier.md,
"Python packages"), and any tier's code may call it so. pip's main() configures logging
for a process of its own: its dictConfig closes every handler the process has made (a
file handler then drops every later record), it puts its handlers on the root logger and
sets the root's level, and every later cell's logging would go through them. install()
puts a finder on sys.meta_path that wraps pip's entry points (`pip._internal.cli.main.main`
and every command's `Command.main`) as their modules are executed, so every way in
(`pip.main`, `python -m pip` run in-process, a command called directly) runs with the
session's handlers out of the registry pip closes, puts the root logger's handlers and
level back when pip returns (with what other threads added meanwhile), and closes the
handlers pip made. Nothing is imported until pip is."""

import os
import sys
import threading

# The modules whose entry points are wrapped as they are executed, and how: cli.main's
# main() (pip.main, `python -m pip` in-process) and every command's Command.main, which
# code may call directly (create_command("...").main([...])).
_WRAP = {
    "pip._internal.cli.main": lambda module: _wrap_attribute(module, "main"),
    "pip._internal.cli.base_command": lambda module: _wrap_attribute(getattr(module, "Command", None), "main"),
}

# One pip at a time in the process (pip is not made for two at once, and each would take
# the other's handlers for the session's); a call inside another leaves the restoring to
# the outer one. `_owner` is the thread running pip, None when none is.
_serial = threading.RLock()
_owner = None

# Where pip's handler classes are defined: a handler is pip's when its class is one of
# this module's (a class merely naming the module is the session's).
_PIP_LOGGING = "pip._internal.utils.logging"


def _after_fork_in_child():
    """A child forked by a thread running pip goes on inside that pip, and leaves it as the
    parent would; one forked while another thread ran pip has the lock held by no thread of
    its own: its pip starts afresh."""
    global _serial, _owner
    if _owner != threading.get_ident():
        _serial, _owner = threading.RLock(), None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _wrap_attribute(owner, name):
    if owner is not None and callable(getattr(owner, name, None)):
        setattr(owner, name, keeping_logging(getattr(owner, name)))


def keeping_logging(main):
    """`main`, leaving the process's handlers open and the root logger's handlers and level
    as it found them."""

    def main_keeping_logging(*args, **kwargs):
        global _owner
        import logging                        # pip has imported it already

        with _serial:
            if _owner is not None:            # this thread's pip, inside another
                return main(*args, **kwargs)
            _owner = threading.get_ident()
            root = logging.getLogger()
            handlers, level = list(root.handlers), root.level
            listed, named = [], {}
            try:
                # logging.config's dictConfig closes every handler in this registry, on
                # any logger, and logging.shutdown() (Command.main's last step) flushes
                # and closes them too.
                with logging._lock:
                    listed, named = list(logging._handlerList), dict(logging._handlers)
                    del logging._handlerList[:]
                return main(*args, **kwargs)
            finally:
                _owner = None
                _put_back(logging, root, handlers, level, listed, named)

    main_keeping_logging.__wrapped__ = main
    main_keeping_logging.__doc__ = main.__doc__
    return main_keeping_logging


def _put_back(logging, root, handlers, level, listed, named):
    """The root logger's handlers and level as they were, with what other threads added
    meanwhile; the registry with the session's handlers again; pip's handlers (of pip's own
    classes, on the root logger or in the registry) closed. Handlers are told apart by
    identity: a class's __eq__ is its own business."""
    with logging._lock:
        seen = list(root.handlers) + list(logging._handlers.values())
        ours = {id(h) for h in handlers}
        pips = {id(h): h for h in seen if id(h) not in ours and _is_pips(h)}
        others = [h for h in root.handlers if id(h) not in ours and id(h) not in pips]
        root.handlers[:] = handlers + others
        root.setLevel(level)
        kept = {id(r) for r in listed}
        logging._handlerList[:] = listed + [r for r in logging._handlerList if id(r) not in kept]
        for name, h in named.items():
            logging._handlers.setdefault(name, h)
    for h in pips.values():
        try:
            h.close()
        except Exception:                     # pip's handler, and pip is done with it
            pass


def _is_pips(handler):
    module = sys.modules.get(_PIP_LOGGING)
    cls = type(handler)
    return module is not None and getattr(module, cls.__name__, None) is cls


class _WrappingLoader:
    """The loader of a module of _WRAP, wrapping its entry point once it has run. A loader of
    its own: the one it stands for may load other modules too (a zipimporter loads a whole
    archive's), and is left as it is."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _WRAP[module.__name__](module)

    def __getattr__(self, name):              # get_code, get_source, resources...
        if name == "_loader":
            raise AttributeError(name)
        return getattr(self._loader, name)


class PipMainFinder:
    """Finds nothing itself: for the modules of _WRAP, the spec the other finders give,
    with a loader that wraps their entry point once the module has run."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _WRAP:
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
