"""asyncio without ssl until TLS is used. asyncio imports ssl (about 1.5 MiB of every
session's memory, with OpenSSL's libraries) at its own import, for TLS transports that a
session without egress never opens. import_asyncio() imports asyncio with ssl hidden and
gives the asyncio modules that wanted it a stand-in, _SslOnDemand, in its place: the first
use of any ssl name through asyncio (a TLS connection, start_tls, an SSLContext check)
imports the real module and puts it where the stand-in was, with what asyncio.sslproto
derives from it at import (SSLAgainErrors). `import ssl` in user code loads the real module
as always; asyncio then takes that same module at its next use of the stand-in.

Before ssl is imported no ssl.SSLSocket can exist, so asyncio's per-call check
`isinstance(sock, ssl.SSLSocket)` (base_events._check_ssl_socket, on every loop.sock_*
call) is answered without importing ssl."""

import sys
import threading

from . import typing_on_demand


class _NoInstances:
    """A class nothing is an instance of: ssl's socket types while ssl is not imported."""


# Names asyncio may look up only to ask whether an object is one: without ssl, none is.
_TYPES_WITHOUT_INSTANCES = ("SSLSocket", "SSLObject")


class _SslOnDemand:
    def __init__(self, modules):
        self._modules = modules              # the asyncio modules whose `ssl` this is
        self._lock = threading.Lock()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)       # copy, pickle and repr probes: not ssl's
        if name in _TYPES_WITHOUT_INSTANCES and "ssl" not in sys.modules:
            return _NoInstances
        return getattr(self.load(), name)

    def load(self):
        """The real ssl module, now in every module the stand-in was in."""
        with self._lock:
            import ssl
            for module in self._modules:
                if module.__dict__.get("ssl") is self:
                    module.ssl = ssl
                if module.__name__ == "asyncio.sslproto":
                    module.SSLAgainErrors = (ssl.SSLWantReadError, ssl.SSLSyscallError)
            return ssl

    def __repr__(self):
        return "<ssl, imported at its first use>"


def import_asyncio():
    """Imports asyncio; ssl and typing only if something imported them already
    (typing_on_demand.py says how typing waits). Call it before anything else imports
    asyncio (the runner's __main__ does)."""
    if "ssl" in sys.modules or "asyncio" in sys.modules:
        import asyncio  # noqa: F401
        return
    before = set(sys.modules)
    sys.modules["ssl"] = None                # `import ssl` raises ImportError meanwhile
    typing_stand_in = typing_on_demand.hide()
    try:
        import asyncio  # noqa: F401
    finally:
        del sys.modules["ssl"]
        typing_on_demand.unhide(typing_stand_in)
    waiting = [sys.modules[name] for name in sorted(set(sys.modules) - before)
               if "ssl" in getattr(sys.modules[name], "__dict__", {}) and
               sys.modules[name].__dict__["ssl"] is None]
    stand_in = _SslOnDemand(waiting)
    for module in waiting:
        module.ssl = stand_in
