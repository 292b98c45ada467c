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
handlers pip made. pip itself is imported by the code that calls it."""

import logging      # before the at-fork hook below: logging's own (fresh locks) runs first
import os
import sys
import threading

from .common import INTERRUPTIBLE_RUNNER_CODE, uninterruptible

# The modules whose entry points are wrapped as they are executed, and how: cli.main's
# main() (pip.main, `python -m pip` in-process) and every command's Command.main, which
# code may call directly (create_command("...").main([...])).
_WRAP = {
    "pip._internal.cli.main": lambda module: _wrap_attribute(module, "main"),
    "pip._internal.cli.base_command": lambda module: _wrap_attribute(getattr(module, "Command", None), "main"),
}

# One pip at a time in the process (pip is not made for two at once, and each would take
# the other's handlers for the session's); a call inside another leaves the restoring to
# the outer one. `_owner` is the thread running pip, None when none is; `_running` the
# session's logging that pip runs without (a _SetAside), None when none is set aside.
_serial = threading.RLock()
_owner = None
_running = None

# Where pip's handler classes are defined: a handler is pip's when its class is one of
# this module's (a class merely naming the module is the session's).
_PIP_LOGGING = "pip._internal.utils.logging"


def _after_fork_in_child():
    """A child forked by a thread running pip goes on inside that pip, and leaves it as the
    parent would. One forked while another thread ran pip has the lock held by no thread of
    its own: its pip starts afresh, and the session's logging is put back now, as that pip
    would have on its return. (logging's at-fork hook has given the child fresh locks.)"""
    global _serial, _owner, _running
    if _owner != threading.get_ident():
        running = _running
        _serial, _owner, _running = threading.RLock(), None, None
        if running is not None:
            _put_back(running)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _wrap_attribute(owner, name):
    if owner is not None and callable(getattr(owner, name, None)):
        setattr(owner, name, keeping_logging(getattr(owner, name)))


def _wait_for_pip():
    """Returns once no other thread runs pip, without taking the lock (the `with` lets it go
    even when an interrupt comes as it is taken). The call that blocks while another thread
    runs pip: an interrupt lands here (INTERRUPTIBLE_RUNNER_CODE), with nothing taken."""
    with _serial:
        pass


INTERRUPTIBLE_RUNNER_CODE.add(_wait_for_pip.__code__)


def keeping_logging(main):
    """`main`, leaving the process's handlers open and the root logger's handlers and level
    as it found them."""

    def main_keeping_logging(*args, **kwargs):
        global _owner, _running
        # Taken here, where the runner's interrupts do not land, so none leaves it taken;
        # the wait, which may be long, is _wait_for_pip's, where they do.
        while not _serial.acquire(blocking=False):
            _wait_for_pip()
        try:
            if _owner is not None:            # this thread's pip, inside another
                return main(*args, **kwargs)
            try:
                # Setting aside and putting back are the runner's work, which an interrupt
                # does not cut; pip's main itself is user code.
                with uninterruptible():
                    _owner = threading.get_ident()
                    _set_aside()
                return main(*args, **kwargs)
            finally:
                try:
                    if _running is not None:
                        with uninterruptible():
                            _put_back(_running)
                finally:
                    _owner = _running = None
        finally:
            _serial.release()

    main_keeping_logging.__wrapped__ = main
    main_keeping_logging.__doc__ = main.__doc__
    return main_keeping_logging


class _SetAside:
    """The session's logging as pip found it: the root logger's handlers and level, and the
    registry (logging._handlerList, logging._handlers); `closed` the ids of those handlers
    closed already."""

    def __init__(self, handlers, level, listed, named):
        self.handlers, self.level, self.listed, self.named = handlers, level, listed, named
        self.closed = {id(h) for h in handlers if getattr(h, "_closed", False)}

    def closed_meanwhile(self, handler):
        """True for a handler of the session that someone closed while pip ran: pip's
        dictConfig and logging.shutdown() close only what is in the registry, which the
        session's handlers are out of, so it is not put back."""
        return id(handler) not in self.closed and getattr(handler, "_closed", False)


def _set_aside():
    """Takes the session's handlers out of the registry pip closes: logging.config's
    dictConfig closes every handler in it, on any logger, and logging.shutdown()
    (Command.main's last step) flushes and closes them too. Sets `_running` under
    logging's lock, with the registry emptied: a fork (which takes that lock) sees both or
    neither."""
    global _running
    root = logging.root
    with logging._lock:
        saved = _SetAside(list(root.handlers), root.level, list(logging._handlerList),
                          dict(logging._handlers))
        _running = saved
        del logging._handlerList[:]


def _put_back(saved):
    """The root logger's handlers and level as they were, with what other threads added
    meanwhile; pip's handlers (of pip's own classes, on the root logger or in the registry)
    closed; then the registry with the session's handlers again, a name included that
    pip's handler had taken (closing that handler deletes the name, whatever it names now).
    The registry is put back even when a close raises. Handlers are told apart by
    identity: a class's __eq__ is its own business."""
    root = logging.root
    pips = {}
    try:
        with logging._lock:
            ours = {id(h) for h in saved.handlers}
            for h in list(root.handlers) + list(logging._handlers.values()):
                if id(h) not in ours and _is_pips(h):
                    pips[id(h)] = h
            others = [h for h in root.handlers if id(h) not in ours and id(h) not in pips]
            kept = [h for h in saved.handlers if not saved.closed_meanwhile(h)]
            root.handlers[:] = kept + others
            root.setLevel(saved.level)
        for h in pips.values():
            try:
                h.close()
            except Exception:                 # pip's handler, and pip is done with it
                pass
    finally:
        with logging._lock:
            listed = {id(r) for r in saved.listed}
            logging._handlerList[:] = saved.listed + [r for r in logging._handlerList
                                                      if id(r) not in listed]
            for name, h in saved.named.items():
                now = logging._handlers.get(name)
                if (now is None or id(now) in pips) and not saved.closed_meanwhile(h):
                    logging._handlers[name] = h


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
