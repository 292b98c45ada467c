"""Rich outputs: `display(obj)` and the cell's trailing expression turn objects into MIME
bundles the way IPython does, and OutputCapture sends them in order with stdout.

An object's bundle comes from `_repr_mimebundle_()` first, then the single-type methods
(`_repr_png_`, `_repr_jpeg_`, `_repr_svg_`, `_repr_html_`, `_repr_markdown_`,
`_repr_latex_`, `_repr_json_`); matplotlib figures become PNG through the Agg canvas and
PIL images PNG, when those libraries are there. `text/plain` (the repr) is always added.
Only the MIME types of MIME_TYPES leave the sandbox; binary ones travel as base64 and
application/json as JSON text. A `_repr_*_` that raises is reported on stderr and skipped,
like IPython's formatters do.

Sandboxed code also gets IPython's small wrapper classes from `mcp.display` (HTML,
Markdown, SVG, JSON, Latex, Image) to say which type it means:

    from mcp.display import JSON
    display(JSON({"rows": 3}))
"""

import io
import json
import sys

from .common import MAX_DISPLAY_JSON_VALUES, MAX_JSON_DEPTH, RESULT_REPR_LIMIT, as_sent_json

MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png",
              "image/jpeg", "image/svg+xml", "application/json")
BINARY_TYPES = ("image/png", "image/jpeg")
_REPR_METHODS = (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
                 ("image/svg+xml", "_repr_svg_"), ("text/html", "_repr_html_"),
                 ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
                 ("application/json", "_repr_json_"))
MPL_BACKEND = "module://sandbox_runner.mpl_backend"


def _warn(message):
    print(f"display: {message}", file=sys.stderr)


def _call_repr(obj, method, *args):
    """obj.method(*args), or None when it is missing or fails (reported on stderr)."""
    fn = getattr(obj, method, None)
    if not callable(fn):
        return None
    try:
        value = fn(*args)
    except Exception as exc:
        _warn(f"{type(obj).__name__}.{method}() failed: {type(exc).__name__}: {exc}")
        return None
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]                     # (data, metadata): metadata is not sent
    return value


def _figure_png(obj):
    """PNG bytes of a matplotlib Figure or a PIL Image; None for anything else."""
    module = type(obj).__module__ or ""
    try:
        if module.startswith("matplotlib.") and hasattr(obj, "savefig") and \
                hasattr(obj, "canvas"):
            buf = io.BytesIO()
            obj.savefig(buf, format="png", bbox_inches="tight")
            return buf.getvalue()
        if module.startswith("PIL.") and hasattr(obj, "save") and hasattr(obj, "mode"):
            buf = io.BytesIO()
            obj.save(buf, format="PNG")
            return buf.getvalue()
    except Exception as exc:
        _warn(f"rendering {type(obj).__name__} as PNG failed: {type(exc).__name__}: {exc}")
    return None


def _plain(obj):
    try:
        text = repr(obj)
    except Exception as exc:
        text = f"<{type(obj).__name__} object: repr failed: {type(exc).__name__}>"
    if len(text) > RESULT_REPR_LIMIT:
        text = f"{text[:RESULT_REPR_LIMIT]}...[truncated {len(text) - RESULT_REPR_LIMIT} chars]"
    return text


def raw_bundle(obj):
    """The MIME bundle `obj` offers, before normalisation: {mime: value}."""
    bundle = {}
    if not isinstance(obj, type):            # classes have the methods unbound
        mimebundle = _call_repr(obj, "_repr_mimebundle_", None, None)
        if isinstance(mimebundle, dict):
            bundle.update(mimebundle)
        for mime, method in _REPR_METHODS:
            if mime not in bundle:
                value = _call_repr(obj, method)
                if value is not None:
                    bundle[mime] = value
        if "image/png" not in bundle:
            png = _figure_png(obj)
            if png is not None:
                bundle["image/png"] = png
    bundle.setdefault("text/plain", _plain(obj))
    return bundle


def _normalise_value(mime, value):
    """The wire form of one bundle entry: a str, or None (with a warning) when unusable."""
    if mime in BINARY_TYPES:
        import base64                        # only for images: a session that shows none
        import binascii                      # never pays for it
        if isinstance(value, str):           # IPython accepts base64 text too
            try:
                value = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                _warn(f"{mime} data is neither bytes nor base64; not sent")
                return None
        if not isinstance(value, (bytes, bytearray, memoryview)):
            _warn(f"{mime} data is {type(value).__name__}, not bytes; not sent")
            return None
        return base64.b64encode(bytes(value)).decode("ascii")
    if mime == "application/json":
        # sandboxd parses it again and would end the session over what it cannot read.
        plain, problem = as_sent_json(value, MAX_JSON_DEPTH, MAX_DISPLAY_JSON_VALUES)
        if problem:
            _warn(f"application/json data not sent: {problem}")
            return None
        return json.dumps(plain, ensure_ascii=False, allow_nan=False)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        _warn(f"{mime} data is {type(value).__name__}, not str; not sent")
        return None
    return value


def normalise(bundle):
    """Keep the MIME types we send, in wire form; keys are sorted for a stable order."""
    out = {}
    for mime in sorted(k for k in bundle if isinstance(k, str)):
        if mime not in MIME_TYPES:
            continue                         # e.g. application/vnd.jupyter.widget-view+json
        value = _normalise_value(mime, bundle[mime])
        if value is not None:
            out[mime] = value
    return out


def has_rich_repr(obj):
    """True when showing `obj` says more than its repr: worth a display of a trailing
    expression (plain values only go to `done.result`, as before)."""
    if isinstance(obj, (str, bytes, int, float, complex, bool, list, tuple, dict, set,
                        type(None))) or isinstance(obj, type):
        return False
    if any(callable(getattr(obj, method, None))
           for method in ("_repr_mimebundle_",) + tuple(m for _, m in _REPR_METHODS)):
        return True
    module = type(obj).__module__ or ""
    return module.startswith(("matplotlib.figure", "PIL."))


class Displayer:
    """`display()` of one runner: formats objects and hands the bundles to `send`
    (OutputCapture.display). Remembers which matplotlib figures a cell displayed, so the
    end-of-cell flush does not show them twice. `Displayer.current` is the runner's (the
    matplotlib backend's show() finds it there)."""

    current = None

    def __init__(self, send):
        self._send = send
        self._shown_figures = set()
        Displayer.current = self

    def display(self, *objs, raw=False, include=None, exclude=None):
        """display(obj, ...): show objects as rich outputs (images, HTML, markdown, JSON).
        With raw=True each object is a ready bundle {mime type: data}; include and
        exclude name the MIME types to keep or leave out."""
        for obj in objs:
            if raw:
                if not isinstance(obj, dict):
                    raise TypeError("display(raw=True) takes dicts of {mime type: data}")
                bundle = dict(obj)
            else:
                bundle = raw_bundle(obj)
                if (type(obj).__module__ or "").startswith("matplotlib.figure"):
                    self._shown_figures.add(id(obj))
            if include is not None:
                bundle = {k: v for k, v in bundle.items() if k in include}
            if exclude is not None:
                bundle = {k: v for k, v in bundle.items() if k not in exclude}
            wire = normalise(bundle)
            if wire:
                self._send(wire)

    def begin_cell(self):
        self._shown_figures.clear()

    def discard_figures(self):
        """After a failed cell: close its figures unshown (the next cell starts clean)."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            self._close_figures(pyplot)

    def _close_figures(self, pyplot):
        self._shown_figures.clear()
        try:
            pyplot.close("all")
        except Exception as exc:
            _warn(f"closing matplotlib figures failed: {exc!r}")

    def flush_figures(self):
        """Show the matplotlib figures the cell left open, then close them (what Jupyter's
        inline backend does), when pyplot is in use with our backend."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        try:
            import matplotlib
            if matplotlib.get_backend() != MPL_BACKEND:
                return
            from matplotlib._pylab_helpers import Gcf
            figures = [m.canvas.figure for m in Gcf.get_all_fig_managers()]
        except Exception as exc:
            _warn(f"collecting matplotlib figures failed: {exc!r}")
            return
        try:
            for figure in figures:
                if id(figure) not in self._shown_figures:
                    self.display(figure)
        finally:
            self._close_figures(pyplot)
