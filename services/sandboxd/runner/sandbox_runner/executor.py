"""Running cells: ExecState (one running exec), Executor (the persistent namespace, its
event loop and catalog; compiles and runs cells on the main thread) and the error reports
of `done` frames, whose tracebacks show only user code."""

import ast
import asyncio
import builtins
import collections
import datetime
import functools
import inspect
import itertools
import json
import linecache
import math
import re
import sys
import traceback
import types

from .common import (CELL_PREFIX, DEFAULT_TOOL_CALLS_IN_FLIGHT, ERROR_MESSAGE_LIMIT,
                     LINECACHE_BUDGET, RESULT_NAME, RESULT_REPR_LIMIT, TRACEBACK_LIMIT,
                     is_runner_file)
from .display import has_rich_repr
from .pip_in_cell import install as install_pip_in_cell
from .runtime_module import install_runtime_module, install_server_modules
from .tool_calls import CallGate, ToolError
from .toolbox import Toolbox


# Modules every namespace starts with: the ones codemode-lite's run_python description
# says are available without an import.
PREIMPORTED = {module.__name__: module for module in
               (asyncio, collections, datetime, functools, itertools, json, math, re)}


def display_module(display):
    """The module `mcp.display` whose display() is `display`; its wrappers (HTML, Image...,
    display_objects.py) load when code first looks one up (a module __getattr__, PEP 562),
    so a session that never uses them does not hold them."""
    module = types.ModuleType("mcp.display")
    module.display = display

    def load(name=None):
        from .display_objects import fill_module
        fill_module(module)
        module.__dict__.pop("__getattr__", None)
        module.__dict__.pop("__dir__", None)
        return module if name is None else getattr(module, name)

    def __getattr__(name):                   # noqa: N807 (the module protocol's name)
        if name.startswith("__") and name != "__all__":
            raise AttributeError(f"module 'mcp.display' has no attribute {name!r}")
        return load(name)

    module.__getattr__ = __getattr__
    module.__dir__ = lambda: dir(load())
    return module


def _cap(text, limit):
    """Cut `text` to `limit` chars with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[truncated {len(text) - limit} chars]"


class ExecState:
    """One running exec, shared between the main thread and the reader threads."""

    def __init__(self, exec_id, conn, max_tool_calls_in_flight=DEFAULT_TOOL_CALLS_IN_FLIGHT):
        self.id = exec_id
        self.conn = conn
        self.gate = CallGate(max_tool_calls_in_flight)
        self.interrupt_requested = False
        self.finished = False
        self.loop = None
        self.task = None                      # set while a coroutine cell runs on the loop
        self.resender = False                 # a thread resends SIGINT until it is delivered
        self.delivered = False                # a KeyboardInterrupt was raised in user code


def _strip_runner_frames(te):
    """Remove the runner's frames from a TracebackException (and its chain): everything
    before the first <cell-N> frame (runner and asyncio dispatch), runner frames below
    it (tool proxies, helpers) and library frames those runner frames called."""
    seen = set()
    todo = [te]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        kept, in_user_code, hidden = [], False, False
        for frame in current.stack:
            if frame.filename.startswith(CELL_PREFIX):
                in_user_code, hidden = True, False
                kept.append(frame)
            elif is_runner_file(frame.filename):
                hidden = True
            elif in_user_code and not hidden:
                kept.append(frame)
        current.stack = traceback.StackSummary.from_list(kept)
        todo += [current.__cause__, current.__context__]
        todo += getattr(current, "exceptions", None) or []


def _safe_str(exc):
    try:
        return str(exc)
    except BaseException:  # a broken __str__ must not break the runner
        return f"<unprintable {type(exc).__name__} object>"


def describe_exception(exc):
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
        _strip_runner_frames(te)
        text = "".join(te.format())
    except BaseException as format_error:
        text = f"{type(exc).__name__}: <traceback unavailable: {format_error!r}>\n"
    if len(text) > TRACEBACK_LIMIT:
        head, tail = TRACEBACK_LIMIT // 4, TRACEBACK_LIMIT * 3 // 4
        text = (f"{text[:head]}\n...[truncated {len(text) - head - tail} chars]...\n"
                f"{text[-tail:]}")
    return {"type": type(exc).__name__, "message": _cap(_safe_str(exc), ERROR_MESSAGE_LIMIT),
            "traceback": text}


class Executor:
    """Owns the namespace, the event loop and the catalog; runs cells on the main thread."""

    def __init__(self, runner):
        install_pip_in_cell()                # pip's main() in a cell keeps the cell's logging
        self._runner = runner
        self._interrupts = runner.interrupts
        self.exec_count = 0                  # execs in this namespace (`ready.execs`)
        self._cell = 0
        self._sources = []                   # (filename, size) of cells in linecache
        self._source_chars = 0
        self.loop = None
        self.module = None
        self.catalog = []
        self.toolbox = Toolbox([], runner.calls)
        self._installed = {}                 # global name -> server object we put there
        self._mcp_package, self._mcp_runtime, self._mcp_servers = \
            install_runtime_module(lambda: self.toolbox)
        self._displayer = runner.displayer
        self._mcp_display = display_module(self._displayer.display)
        self._mcp_package.display = self._mcp_display
        self.reset()

    # -- namespace -------------------------------------------------------------------

    def reset(self):
        """Fresh namespace (same catalog) and a fresh event loop: tasks the old namespace
        left on the loop must not keep running in later execs."""
        self._new_loop()
        if self._interrupts is not None:
            self._interrupts.forget_user_code()
        # The namespace is the __dict__ of a real module registered as __main__, so
        # pickle, `import __main__` and classes defined in cells behave as in a script.
        self.module = types.ModuleType("__main__")
        self.module.__dict__.update({"__builtins__": builtins, "ToolError": ToolError,
                                     "mcp": self._mcp_package,
                                     "display": self._displayer.display})
        self.module.__dict__.update(PREIMPORTED)
        sys.modules["__main__"] = self.module
        self._installed = {}
        self.exec_count = 0
        self._install_toolbox(self.catalog)

    def _new_loop(self):
        if self.loop is not None:
            for task in asyncio.all_tasks(self.loop):
                task._log_destroy_pending = False   # no "Task was destroyed" noise later
                task.cancel()
            self.loop.close()
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)

    def loop_after_fork_in_child(self):
        """In a child of fork(): the loop's epoll instance and wakeup socket are the
        parent's own, and epoll wakes one waiter only, so a child waiting in the loop (it
        forked in an async cell and went on) would take the parent's wakeups and hang it.
        The child's loop gets a selector and a wakeup socket of its own."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        inherited = loop._selector
        own = type(inherited)()
        for key in list(inherited.get_map().values()):
            own.register(key.fileobj, key.events, key.data)
        loop._selector = own
        inherited.close()                    # the child's descriptor only
        loop._close_self_pipe()
        loop._make_self_pipe()

    def set_catalog(self, servers):
        self.catalog = servers
        self._install_toolbox(servers)

    def _install_toolbox(self, servers):
        namespace = self.module.__dict__
        self.toolbox = Toolbox(servers, self._runner.calls)
        new_globals = self.toolbox.namespace_globals()
        for name, obj in self._installed.items():
            if name not in new_globals and namespace.get(name) is obj:
                del namespace[name]          # a server that left the catalog
        namespace.update(new_globals)
        namespace["ToolError"] = ToolError
        self._installed = {name: obj for name, obj in self.toolbox.server_objects.items()}
        sys.modules["mcp"] = self._mcp_package
        sys.modules["mcp.runtime"] = self._mcp_runtime
        sys.modules["mcp.display"] = self._mcp_display
        sys.modules["mcp.servers"] = self._mcp_servers
        install_server_modules(self._mcp_servers, self.toolbox, sys.modules)

    # -- cells -----------------------------------------------------------------------

    def _remember_source(self, filename, source):
        """Register the cell in linecache so tracebacks (and inspect.getsource) show its
        lines; the oldest cells are forgotten once LINECACHE_BUDGET chars are kept."""
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self._sources.append((filename, len(source)))
        self._source_chars += len(source)
        while self._source_chars > LINECACHE_BUDGET and len(self._sources) > 1:
            old, size = self._sources.pop(0)
            linecache.cache.pop(old, None)
            self._source_chars -= size

    @staticmethod
    def _compile(source, filename):
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(source, filename, "exec", flags=flags | ast.PyCF_ONLY_AST,
                       dont_inherit=True)
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            # Notebook semantics: the trailing expression's value is the cell's result.
            last = tree.body[-1]
            target = ast.Name(id=RESULT_NAME, ctx=ast.Store())
            tree.body[-1] = ast.copy_location(ast.Assign(targets=[target], value=last.value),
                                              last)
            ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", flags=flags, dont_inherit=True)

    def run(self, state, source):
        """Run one cell; returns the `done` fields status, result and error."""
        self._cell += 1
        code = self.begin_cell(source, f"{CELL_PREFIX}{self._cell}>")
        if not isinstance(code, types.CodeType):
            return code                          # it did not compile: the error's fields
        namespace = self.module.__dict__
        async_cell = bool(code.co_flags & inspect.CO_COROUTINE)
        leaving = self._interrupts.leaving()
        try:
            try:
                self._interrupts.enter_user_code(state, async_cell)
                self._displayer.begin_cell()
                if async_cell:
                    self._run_on_loop(state, eval(code, namespace))
                else:
                    eval(code, namespace)
                result = self.cell_result()
            finally:
                collections.deque(leaving, 0)    # leave_user_code(), which nothing stops
        except BaseException as exc:
            self._interrupts.leave_user_code()   # again: more handlers may have raised
            return self.cell_failed(state, exc)  # than `leaving` had tries
        return "ok", result, None

    def begin_cell(self, source, filename):
        """Count the exec, keep the source for tracebacks and compile it: the code object,
        or the `done` fields (status, result, error) of a cell that does not compile."""
        self.exec_count += 1
        self._remember_source(filename, source)
        try:
            code = self._compile(source, filename)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
            return "error", None, describe_exception(exc)
        self.module.__dict__.pop(RESULT_NAME, None)
        return code

    def cell_result(self):
        """After the cell's code ran: the repr of its trailing expression (or None).
        Notebook semantics again: a trailing chart or table is shown, and so are the
        figures the cell left open. Both run user code (reprs, savefig), so the caller
        keeps them interruptible."""
        value = self.module.__dict__.pop(RESULT_NAME, None)
        result = None if value is None else _cap(repr(value), RESULT_REPR_LIMIT)
        if value is not None and has_rich_repr(value):
            self._displayer.display(value)
        self._displayer.flush_figures()
        return result

    def cell_failed(self, state, exc):
        """The `done` fields of a cell that raised `exc`."""
        self.module.__dict__.pop(RESULT_NAME, None)
        self._displayer.discard_figures()
        error = describe_exception(exc)
        if state.interrupt_requested and isinstance(exc, (KeyboardInterrupt,
                                                          asyncio.CancelledError)):
            error.update(type="KeyboardInterrupt", message="execution interrupted")
            return "interrupted", None, error
        return "error", None, error

    def _run_on_loop(self, state, coroutine):
        """Run a top-level-await cell as a Task on the one persistent loop."""
        if self.loop.is_closed():            # user code closed it; the namespace lives on
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        loop = self.loop
        task = loop.create_task(coroutine)
        self._interrupts.attach_task(state, loop, task)
        try:
            while True:
                try:
                    return loop.run_until_complete(task)
                except KeyboardInterrupt:
                    if task.done():
                        raise                 # raised inside the cell's own code
                    # Raised in a callback outside the task: cancel the task and keep
                    # the loop running so the cell's finally blocks run.
                    task.cancel()
        finally:
            self._interrupts.detach_task(state)
            if task.done() and not task.cancelled():
                task.exception()              # mark retrieved: no "never retrieved" log
