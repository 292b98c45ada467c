"""PausedSignals: signal handlers of user code run only while user code runs."""

import _signal                                # signal's C functions: no enum conversions
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
    cannot end the runner with the signal's default action. Main thread only."""

    def __init__(self, own_handlers):
        self._own = [*own_handlers, self._drop]  # handlers of the runner, kept
        self._signals = sorted(_signal.valid_signals())
        self._paused = {}                     # signum -> the user handler it replaced

    def pause(self):
        for signum in self._signals:          # 2 us: signal.getsignal would take 80
            handler = _signal.getsignal(signum)
            if callable(handler) and handler not in self._own:
                self._paused[signum] = handler
                signal.signal(signum, self._drop)

    def resume(self):
        paused, self._paused = self._paused, {}
        for signum, handler in paused.items():
            signal.signal(signum, handler)

    def forget(self):
        self._paused = {}

    @staticmethod
    def _drop(signum, frame):
        pass
