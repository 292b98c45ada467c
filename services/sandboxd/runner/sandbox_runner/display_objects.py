"""The module `mcp.display` of sandboxed code: `display` and IPython's small wrappers that
say which MIME type an object means (HTML, Markdown, SVG, Latex, JSON, Image), so code
written for Jupyter ports by changing one import:

    from mcp.display import display, HTML, Image
    display(HTML("<b>done</b>"), Image(filename="out/chart.png"))
"""

import os


class _TextDisplay:
    """Holds text (or, with filename=, the text of a file) shown as one MIME type."""
    mime = "text/plain"

    def __init__(self, data=None, filename=None):
        if filename is not None:
            with open(filename, encoding="utf-8", errors="replace") as f:
                data = f.read()
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        if not isinstance(data, str):
            raise TypeError(f"{type(self).__name__} takes text, not {type(data).__name__}")
        self.data = data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {self.mime: self.data, "text/plain": repr(self)}

    def __repr__(self):
        return f"<{type(self).__name__} of {len(self.data)} chars>"


class HTML(_TextDisplay):
    mime = "text/html"


class Markdown(_TextDisplay):
    mime = "text/markdown"


class SVG(_TextDisplay):
    mime = "image/svg+xml"


class Latex(_TextDisplay):
    mime = "text/latex"


class JSON:
    """A JSON value (dict, list, ...) shown as application/json."""

    def __init__(self, data):
        self.data = data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/json": self.data, "text/plain": repr(self.data)}

    def __repr__(self):
        return f"JSON({self.data!r})"


class Image:
    """PNG or JPEG bytes (data=) or a file (filename=), shown as an image."""
    _FORMATS = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg"}

    def __init__(self, data=None, filename=None, format=None):
        if filename is not None:
            with open(filename, "rb") as f:
                data = f.read()
            if format is None:
                format = os.path.splitext(filename)[1].lstrip(".")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("Image takes bytes (data=) or a file (filename=)")
        if format is None:
            format = "jpeg" if bytes(data[:3]) == b"\xff\xd8\xff" else "png"
        mime = self._FORMATS.get(str(format).lower())
        if mime is None:
            raise ValueError(f"Image format {format!r} is not png or jpeg")
        self.data, self.mime = bytes(data), mime

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {self.mime: self.data, "text/plain": repr(self)}

    def __repr__(self):
        return f"<Image {self.mime}, {len(self.data)} bytes>"


def fill_module(module):
    """Puts the wrappers into `module`, the `mcp.display` of executor.display_module()."""
    for cls in (HTML, Markdown, SVG, Latex, JSON, Image):
        cls.__module__ = "mcp.display"
        setattr(module, cls.__name__, cls)
    module.__doc__ = __doc__
    module.__all__ = ["display", "HTML", "Markdown", "SVG", "Latex", "JSON", "Image"]
