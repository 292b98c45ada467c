"""PausedSignals: signal handlers of user code run only while user code runs."""

import _signal                                # signal's C functions: no enum conversions
import signal
import threading


class PausedSignals:
    """Between execs the main thread runs only the runner, and Python runs a signal
    handler in whatever frame the main thread is in. A handler user code installed that
    prints or raises there (say while the runner waits to send a `done` frame) would
    break the runner's own frames and lose the exec's `done`. So pause() swaps every
    Python handler that is not the runner's own for one that only notes the signal, and
    resume() puts them back and sends the noted signals to the main thread again: a
    signal that came between execs is handled as the next exec starts, in its code.
    Main thread only."""

    def __init__(self, own_handlers):
        self._own = [*own_handlers, self._note]  # handlers of the runner, kept
        self._signals = sorted(_signal.valid_signals())
        self._paused = {}                     # signum -> the user handler it replaced
        self._noted = set()

    def pause(self):
        for signum in self._signals:          # 3 us: signal.getsignal would take 80
            handler = _signal.getsignal(signum)
            if callable(handler) and handler not in self._own:
                self._paused[signum] = handler
                signal.signal(signum, self._note)

    def resume(self):
        paused, self._paused = self._paused, {}
        for signum, handler in paused.items():
            signal.signal(signum, handler)
        noted, self._noted = self._noted, set()
        for signum in sorted(noted):
            signal.pthread_kill(threading.main_thread().ident, signum)

    def _note(self, signum, frame):
        self._noted.add(signum)
