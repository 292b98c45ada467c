"""The matplotlib backend of sandboxed code (the runner sets MPLBACKEND to
module://sandbox_runner.mpl_backend): Agg rendering, and plt.show() displays the open
figures as image/png outputs and closes them, like Jupyter's inline backend. Figures a
cell leaves open are displayed when it ends (Displayer.flush_figures).

Only matplotlib imports this module, so matplotlib is there; the guard lets the runner's
own checks import every module of the package on a host without it."""

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas  # noqa: F401
    from matplotlib.backend_bases import FigureManagerBase as FigureManager  # noqa: F401
except ImportError:  # pragma: no cover
    pass


def show(*args, **kwargs):
    """plt.show(): display every open figure now and close it."""
    from .display import Displayer
    if Displayer.current is not None:
        Displayer.current.flush_figures()
