"""Interrupts: InterruptController turns an `interrupt` frame into a KeyboardInterrupt in
user code, and never in the runner's own frames."""

import _signal                                # signal's C functions: no enum conversions
import asyncio
import os
import signal
import sys
import threading
import time

from .common import (INTERRUPT_RESEND_INTERVAL, INTERRUPTIBLE_RUNNER_CODE,
                     RUNNER_RECURSION_LIMIT, end_uninterruptible, in_uninterruptible,
                     is_runner_file, log, start_bare_thread)
from .protocol import sending_here
from .swallowed import SwallowedInterrupt
from .user_signals import PausedSignals, surely


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep
_SELECTORS_FILE = __import__("selectors").__file__


class InterruptController:
    """Turns an `interrupt` frame into a KeyboardInterrupt in user code.

    interrupt() sets a flag, sends SIGINT to the main thread (that breaks time.sleep and
    pure-Python loops) and cancels the cell's task when one runs on the loop.

    The SIGINT handler raises KeyboardInterrupt only while user code runs, and never in a
    frame of the runner itself (nor in asyncio's own frames during a coroutine cell, where
    the task cancellation does the job), nor while the main thread is inside the runner's
    common.uninterruptible(): a KeyboardInterrupt there could cut a frame in half, leave
    the runner's work half done or corrupt the event loop. A helper thread sends the
    signal again every INTERRUPT_RESEND_INTERVAL until user code gets it or the exec ends:
    the handler may have declined it, or not run at all (a signal that lands between the
    eval loop's last check and a blocking system call, time.sleep's, is handled only once
    the call returns). Signals that arrive outside an exec are ignored. This is the default SIGINT
    behaviour made safe for the runner; user code may still replace the handler (sandboxd
    then kills the container after its grace period).

    Code that spends nearly all its time in the runner (a loop of print() calls, its main
    thread blocked sending output) would meet a resent SIGINT in a user frame only by
    chance, so the runner's entry points that user code calls also raise a declined
    interrupt on their way back (returning_to_user_code). One exec gets one
    KeyboardInterrupt, unless Python ignores it in a finalizer (SwallowedInterrupt).
    """

    def __init__(self, lock):
        self._lock = lock                     # the runner's state lock
        self._main_ident = threading.main_thread().ident
        self._state = None
        self._async_cell = False
        self._swallowed = SwallowedInterrupt(lambda frame: not self._not_user_frame(frame),
                                             self._on_swallowed, self._deliver_if_due)
        self._sigint = self._on_sigint        # the one bound method installed
        self._user_signals = PausedSignals(self._sigint)
        self._leaving_tries = len(signal.valid_signals()) + 8   # a raise per signal, and more
        self._user_recursion_limit = None     # user code's, while the runner's is in force
        self.user_code_active = False         # written by the main thread only

    def install(self):
        signal.signal(signal.SIGINT, self._sigint)
        self._swallowed.install()

    def _on_sigint(self, signum, frame):
        state = self._state
        if not self.user_code_active or state is None or state.delivered:
            return
        if frame is not None and self._cannot_raise_in(frame):
            return                            # the resender sends it again
        self._deliver(state, frame)

    def _deliver(self, state, frame=None):
        """Raises the exec's KeyboardInterrupt in `frame`, when known (see
        SwallowedInterrupt.interrupt)."""
        state.delivered = True
        raise self._swallowed.interrupt(frame)

    def _on_swallowed(self):
        state = self._state
        if state is None:
            return
        with self._lock:
            state.delivered = False
            start_resender = self._claim_resender_locked(state)
        if start_resender:
            self._start_resender(state)

    def _deliver_if_due(self, frame):
        state = self._state
        if state is None or state.delivered or not self.user_code_active:
            return
        if sending_here() or in_uninterruptible():
            return                            # the resender goes on until it lands
        self._deliver(state, frame)

    def _cannot_raise_in(self, frame):
        return self._not_user_frame(frame) or sending_here() or in_uninterruptible()

    def _not_user_frame(self, frame):
        """True for the runner's frames (but INTERRUPTIBLE_RUNNER_CODE's), a finalizer's
        that swallowed the interrupt, and asyncio's during a coroutine cell."""
        code = frame.f_code
        filename = code.co_filename
        if code in INTERRUPTIBLE_RUNNER_CODE:
            return False
        return is_runner_file(filename) or self._swallowed.is_finalizer(code) or (
            self._async_cell and (filename.startswith(_ASYNCIO_DIR) or
                                  filename == _SELECTORS_FILE))

    def returning_to_user_code(self):
        """Called by a runner function that user code called, as it returns: raises a
        requested interrupt that has not reached user code yet, as if it came from the
        call. Only on the main thread, and only when the caller (two frames up) is user
        code that no send of the runner runs below: a frame of the runner is never cut in
        half."""
        state = self._state
        if state is None or not state.interrupt_requested or state.delivered:
            return
        if not self.user_code_active or threading.get_ident() != self._main_ident:
            return
        caller = sys._getframe(2)
        if self._cannot_raise_in(caller):
            return
        self._deliver(state, caller)

    # -- main thread -------------------------------------------------------------------

    def begin(self, state):
        end_uninterruptible()
        self._state = state
        self._swallowed.reset()

    def end(self, state):
        with self._lock:
            state.finished = True
        self._state = None
        self._swallowed.reset()

    def enter_user_code(self, state, async_cell):
        self._async_cell = async_cell
        limit, self._user_recursion_limit = self._user_recursion_limit, None
        if limit is not None and sys.getrecursionlimit() == RUNNER_RECURSION_LIMIT:
            sys.setrecursionlimit(limit)      # user code's lower limit, unless a thread
                                              # of user code has set one since
        self.user_code_active = True
        self._user_signals.resume()
        # An interrupt that arrived before user code started (say during compile) found
        # nothing to interrupt; honour it now.
        if state.interrupt_requested:
            self._deliver(state)

    def leave_user_code(self):
        """Returns once no signal handler of user code is installed, or raises what a
        handler raised meanwhile (see leaving()). Idempotent. The runner's own code gets a
        recursion limit of at least RUNNER_RECURSION_LIMIT until user code runs again."""
        self.user_code_active = False
        limit = sys.getrecursionlimit()
        if limit < RUNNER_RECURSION_LIMIT:
            self._user_recursion_limit = limit
            sys.setrecursionlimit(RUNNER_RECURSION_LIMIT)
        self._user_signals.pause()

    def leaving(self):
        """Made before user code runs: consumed with collections.deque(it, 0) as it ends,
        it calls leave_user_code() however many signal handlers raise meanwhile."""
        return surely(self.leave_user_code, self._leaving_tries)

    def user_handlers_installed(self):
        """True while user code has a signal handler of its own (main thread)."""
        return self._user_signals.any_installed()

    def forget_user_code(self):
        """A `reset`: the signal handlers of the old namespace are not put back."""
        self._user_signals.forget()

    def attach_task(self, state, loop, task):
        with self._lock:
            state.loop, state.task = loop, task
            cancel_now = state.interrupt_requested
        if cancel_now:
            task.cancel()

    def detach_task(self, state):
        with self._lock:
            state.task = None

    # -- any thread --------------------------------------------------------------------
    # SIGINT is sent under the lock, while the exec is known not to have finished: end()
    # needs the lock to finish it, so the signal is pending for the main thread before the
    # exec is over, and the main thread takes it (outside user code: ignored) before it
    # runs any code of the next exec.

    def interrupt(self, state):
        with self._lock:
            if state.finished:
                return
            state.interrupt_requested = True
            loop, task = state.loop, state.task
            start_resender = self._claim_resender_locked(state)
            signal.pthread_kill(self._main_ident, signal.SIGINT)
        if task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass
        if start_resender:
            self._start_resender(state)

    @staticmethod
    def _claim_resender_locked(state):
        """True when the caller is to start the exec's one resender thread."""
        start = not state.resender
        state.resender = True
        return start

    def _start_resender(self, state):
        try:
            start_bare_thread(self._resend, (state,))
        except RuntimeError as exc:           # no thread to be had: the SIGINT sent stands
            log(f"interrupt resender: {exc}")
            with self._lock:
                state.resender = False

    def _resend(self, state):
        while True:
            time.sleep(INTERRUPT_RESEND_INTERVAL)
            with self._lock:
                if state.finished or state.delivered:
                    state.resender = False
                    return
                # Not delivered yet: declined, or never seen (a signal that comes after
                # the eval loop's last check and before time.sleep's system call is handled
                # only once the sleep ends), while the handler is still the runner's
                # (read with _signal: signal.getsignal would run methods of a user object
                # installed as the handler, here, under the runner's lock).
                if _signal.getsignal(signal.SIGINT) is self._sigint:
                    signal.pthread_kill(self._main_ident, signal.SIGINT)
