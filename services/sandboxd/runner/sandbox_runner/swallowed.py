"""SwallowedInterrupt: a KeyboardInterrupt that Python ignored in a finalizer is raised
again in user code."""

import sys


class SwallowedInterrupt:
    """Python ignores an exception raised in a finalizer (__del__, a weakref callback) and
    hands it to sys.unraisablehook: an interrupt raised while a finalizer runs would be
    lost, and printed with the runner's frames. The hook installed here takes back the
    exec's own KeyboardInterrupt (any other exception goes to Python's default hook):

    - it is not printed, and the owner is told it is pending again (on_swallowed);
    - the finalizer's frames stop counting as user code (is_finalizer) for the rest of
      the exec, so the next interrupt is not raised there again;
    - a line trace on the nearest user frame below the finalizer calls deliver(frame) at
      that frame's next line, which raises the interrupt there. Only that frame is traced, and
      only while user code has no trace function of its own; otherwise the owner's other
      ways of raising an interrupt apply.

    The owner raises every interrupt with `raise swallowed.interrupt()`, and calls reset()
    when an exec begins and ends. Used on the main thread only.
    """

    def __init__(self, is_user_frame, on_swallowed, deliver):
        self._is_user_frame = is_user_frame   # frame -> bool, consults is_finalizer
        self._on_swallowed = on_swallowed     # () -> None: the interrupt is due again
        self._deliver = deliver               # frame -> None: raises it there when due
        self._raised = None                   # the KeyboardInterrupt raised in this exec
        self._codes = set()                   # code objects of finalizers that swallowed it
        self._traced_frame = None
        self._trace_line = self._on_trace_line
        self._trace_calls = self._on_trace_call

    def install(self):
        sys.unraisablehook = self._on_unraisable

    def interrupt(self):
        """A new KeyboardInterrupt for the owner to raise, remembered by the hook."""
        self._stop_tracing()
        self._raised = KeyboardInterrupt()
        return self._raised

    def is_finalizer(self, code):
        return code in self._codes

    def reset(self):
        self._raised = None
        self._codes.clear()
        self._stop_tracing()

    def _on_unraisable(self, unraisable):
        if self._raised is None or unraisable.exc_value is not self._raised:
            sys.__unraisablehook__(unraisable)
            return
        self._raised = None
        tb = unraisable.exc_traceback
        while tb is not None:
            if self._is_user_frame(tb.tb_frame):
                self._codes.add(tb.tb_frame.f_code)
            tb = tb.tb_next
        self._on_swallowed()
        frame = sys._getframe(1)              # the frame the finalizer interrupted
        while frame is not None and not self._is_user_frame(frame):
            frame = frame.f_back
        if frame is None or self._traced_frame is not None or sys.gettrace() is not None:
            return
        self._traced_frame = frame
        frame.f_trace = self._trace_line
        sys.settrace(self._trace_calls)

    def _on_trace_call(self, frame, event, arg):
        return None                           # no other frame is traced

    def _on_trace_line(self, frame, event, arg):
        if event != "line":
            return self._trace_line
        self._stop_tracing()
        self._deliver(frame)
        return None

    def _stop_tracing(self):
        frame, self._traced_frame = self._traced_frame, None
        if frame is None:
            return
        frame.f_trace = None
        if sys.gettrace() == self._trace_calls:
            sys.settrace(None)
