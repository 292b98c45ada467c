"""PausedSignals: signal handlers of user code run only while user code runs; surely():
a call that no exception of a signal handler stops."""

import _signal                                # signal's C functions: no enum conversions
import _io                                   # io.IOBase without the ABC around it
import signal


class PausedSignals:
    """Between execs the main thread runs only the runner, and Python runs a signal
    handler in whatever frame the main thread is in. A handler user code installed that
    prints or raises there (say while the runner waits to send a `done` frame) would
    break the runner's own frames and lose the exec's `done`. So pause() swaps every
    Python handler that is not the runner's own for one that does nothing, and resume()
    puts them back: a signal that comes while no exec runs is dropped, as a timer's tick
    would be if nothing listened. (A handler that does nothing, not SIG_IGN: an ignored
    SIGCHLD would have the kernel reap the children of user code.)

    forget() drops the paused handlers for good (a `reset` replaced the namespace they
    belong to); the do-nothing handler stays, so a timer the old namespace left running
    cannot end the runner with the signal's default action, and SIGINT gets the runner's
    own handler back whatever user code made of it.

    Handlers are told apart by identity and set through _signal: no method of a user
    object (__eq__, __hash__) runs here. Main thread only."""

    def __init__(self, sigint_handler):
        self._sigint = sigint_handler         # the runner's, exactly as installed
        self._signals = sorted(_signal.valid_signals())
        self._paused = {}                     # signum -> the user handler it replaced
        self._mask = None                     # the main thread's, while pause() blocks all

    def pause(self):
        """Returns once no handler of user code is installed. The main thread blocks every
        signal first (the runner's threads always do), so that only signals pending by
        then, or caught by a thread of user code, can still run a handler here, and keeps
        them blocked until the swap is done. A handler that raises meanwhile (its signal
        came as the cell ended) cuts this call short; the caller's next call goes on where
        it stopped, still blocked, and the signals pending then find the do-nothing
        handler. With no handler of user code, nothing is blocked."""
        if self._mask is None:
            if not self._paused and not self.any_installed():
                return
            self._mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, ())
        _signal.pthread_sigmask(_signal.SIG_BLOCK, self._signals)
        self._swap_out()
        mask, self._mask = self._mask, None
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)

    def _swap_out(self):
        paused = self._paused
        for signum in self._signals:          # 2 us: signal.getsignal would take 80
            handler = _signal.getsignal(signum)
            if self._is_users(handler):
                paused[signum] = handler
                _signal.signal(signum, _drop)
            elif paused and handler is not _drop:
                paused.pop(signum, None)      # not put back by resume(), replaced since

    def any_installed(self):
        """True while user code has a handler of its own installed (2 us): _is_users,
        inlined, as every exec asks."""
        sigint = self._sigint
        for signum in self._signals:
            handler = _signal.getsignal(signum)
            if handler is not sigint and handler is not _drop and callable(handler):
                return True
        return False

    def _is_users(self, handler):
        return callable(handler) and handler is not self._sigint and handler is not _drop

    def resume(self):
        """Puts the paused handlers back. One may run, and raise, as soon as it is back:
        the ones not yet back stay paused until the next resume(). A pause() left half
        done (every try cut short) is finished first: its signals are still blocked."""
        if self._mask is not None:
            self.pause()
        paused = self._paused
        while paused:
            signum = next(iter(paused))
            _signal.signal(signum, paused[signum])
            del paused[signum]

    def forget(self):
        self._paused = {}
        _signal.signal(signal.SIGINT, self._sigint)


def _drop(signum, frame):
    """The handler of a user signal while no exec runs."""


def surely(function, tries):
    """An iterator that calls function() as it is consumed, until one call returns, up to
    `tries` times. Each call is the close() that an io.IOBase's finalizer makes, and that
    finalizer clears, in C, whatever close() raises (Python 3.11 and 3.12 outside their
    development mode; 3.13 hands it to sys.unraisablehook); consumed by one call of C,
    collections.deque(it, 0), with no line of Python before it (the iterator is made
    beforehand), no signal handler that raises can stop it: signals pending at once on a
    dozen numbers raise at a dozen lines in a row, a try's first line included. Nothing
    process-wide changes meanwhile: what other threads' finalizers raise still reaches
    their sys.unraisablehook."""
    left = [_Try] * tries
    _Try.pending = (function, left)
    return map(_Try.__new__, left)


class _Try(_io._IOBase):
    __slots__ = ()
    pending = None                            # (function, the tries left), from surely()

    def close(self):
        function, left = _Try.pending
        function()
        left.clear()                          # done: the list's iterator ends here
