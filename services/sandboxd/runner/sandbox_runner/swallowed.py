"""SwallowedInterrupt: a KeyboardInterrupt that Python ignored in a finalizer is raised
again in user code."""

import _io
import sys

_IO_DICT = _io._IOBase.__dict__["__dict__"]   # an io object's own __dict__, read in C


class SwallowedInterrupt:
    """Python ignores an exception raised in a finalizer (__del__, a weakref callback) and
    hands it to sys.unraisablehook: an interrupt raised while a finalizer runs would be
    lost, and printed with the runner's frames. The hook installed here takes back the
    exec's own KeyboardInterrupt; any other exception goes to the hook it replaced (one
    that user code set is kept for that, and the runner's is put back as an exec begins;
    when that hook fails, Python's default one reports the exception instead):

    - it is not printed, and the owner is told it is pending again (on_swallowed);
    - the finalizer's own code stops counting as user code (is_finalizer) for the rest of
      the exec, so the next interrupt is not raised there again (what the finalizer
      calls still counts: the same function may be the one the exec loops in);
    - a line trace on the nearest user frame below the finalizer calls deliver(frame) at
      that frame's next line, which raises the interrupt there; when that frame returns
      first, the trace moves on to its caller. While user code has no trace function of
      its own, a `sys.settrace` hook also traces every user frame that starts or resumes
      meanwhile (a generator a builtin consumes, a repr the runner calls), and the first
      line of any of them raises it. With a trace function of its own, only the one frame
      is traced (its hook already makes Python report that frame's lines); raising from
      a trace function makes Python drop that hook.

    One finalizer hides what it drops: the close() an io object's finalizer runs, whose
    exception Python clears without a hook; interrupt(frame) looks for one.

    The owner raises every interrupt with `raise swallowed.interrupt()`, and calls reset()
    when an exec begins and ends. Used on the main thread only.
    """

    def __init__(self, is_user_frame, on_swallowed, deliver):
        self._is_user_frame = is_user_frame   # frame -> bool, consults is_finalizer
        self._on_swallowed = on_swallowed     # () -> None: the interrupt is due again
        self._deliver = deliver               # (frame) -> None: raises it there when due
        self._raised = None                   # the KeyboardInterrupt raised in this exec
        self._codes = set()                   # code objects of finalizers that swallowed it
        self._traced_frame = None
        self._frame_trace_before = None       # the traced frame's own f_trace
        self._hook = self._on_unraisable
        self._fallback = sys.__unraisablehook__
        self._trace_line = self._on_trace_line
        self._trace_calls = self._on_trace_call

    def install(self):
        hook = getattr(sys, "unraisablehook", None)
        if hook is not self._hook:
            self._fallback = hook or sys.__unraisablehook__
            sys.unraisablehook = self._hook

    def interrupt(self, frame=None):
        """A new KeyboardInterrupt for the owner to raise in `frame` (when known),
        remembered by the hook. Raised in, or below, the close() an io object's finalizer
        runs (_closing_frame), it breaks out of that close() as in plain Python, where
        Python clears it unseen: it is due again at once, at the next line of the frame the
        finalizer interrupted, as a swallowed one."""
        self._stop_tracing()
        self._raised = KeyboardInterrupt()
        closing = None if frame is None else _closing_frame(frame)
        if closing is not None:
            self._on_swallowed()
            self._trace(closing.f_back)
        return self._raised

    def is_finalizer(self, code):
        return code in self._codes

    def reset(self):
        self._raised = None
        self._codes.clear()
        self._stop_tracing()
        self.install()

    def _on_unraisable(self, unraisable):
        if self._raised is None or unraisable.exc_value is not self._raised:
            try:
                self._fallback(unraisable)
            except BaseException:             # Python would report this from C, where
                sys.__unraisablehook__(unraisable)  # an interrupt raised is lost
            return
        self._raised = None
        tb = unraisable.exc_traceback
        if tb is not None and self._is_user_frame(tb.tb_frame):
            self._codes.add(tb.tb_frame.f_code)
        self._on_swallowed()
        if self._traced_frame is None:
            self._trace(sys._getframe(1))     # the frame the finalizer interrupted

    def _trace(self, frame):
        while frame is not None and not self._is_user_frame(frame):
            frame = frame.f_back
        if frame is None:
            return
        self._traced_frame = frame
        self._frame_trace_before = frame.f_trace
        frame.f_trace = self._trace_line
        if sys.gettrace() is None:
            sys.settrace(self._trace_calls)

    def _on_trace_call(self, frame, event, arg):
        if self._traced_frame is not None and self._is_user_frame(frame):
            return self._trace_line
        return None

    def _on_trace_line(self, frame, event, arg):
        if self._traced_frame is None:
            return None                       # a frame traced before the interrupt landed
        if event == "line" and self._is_user_frame(frame):
            self._stop_tracing()
            self._deliver(frame)
            return None
        if event == "return" and frame is self._traced_frame:
            self._stop_tracing()
            self._trace(frame.f_back)
            return None
        return self._trace_line

    def _stop_tracing(self):
        frame, self._traced_frame = self._traced_frame, None
        if frame is None:
            return
        frame.f_trace, self._frame_trace_before = self._frame_trace_before, None
        if sys.gettrace() == self._trace_calls:
            sys.settrace(None)


def _closing_frame(frame):
    """The frame, `frame` or one of its callers, of a close() that an io object's finalizer
    runs: _io's finalizer sets the object's `_finalizing` before it calls close(), and
    clears whatever close() raises (Python 3.11 and 3.12; 3.13 hands it to
    sys.unraisablehook). The object is read without running any method of it."""
    while frame is not None:
        code = frame.f_code
        if code.co_argcount:
            obj = frame.f_locals.get(code.co_varnames[0])
            if issubclass(type(obj), _io._IOBase) and _finalizing(_IO_DICT.__get__(obj)):
                return frame
        frame = frame.f_back
    return None


def _finalizing(attributes):
    """`attributes["_finalizing"] is True`, comparing no key but exact strings: a key of
    user code with the same hash would run its __eq__ in a lookup."""
    if type(attributes) is not dict:
        return False
    for key, value in attributes.items():
        if type(key) is str and key == "_finalizing":
            return value is True
    return False
