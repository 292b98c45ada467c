"""Egress for Python on the wasm tier (docs/wasm-tier.md, "Egress"): installed by the
worker's JavaScript (runner_js/python_egress.js) once sandboxd turns egress on, never in a
session without it.

Python's sockets then reach the relay at the address the proxy variables name (and
nothing else), so urllib and anything else that reads HTTP_PROXY and HTTPS_PROXY work
unchanged. Pyodide's ssl module has no OpenSSL of its own: its SSLSocket asks the
JavaScript side to start TLS on the socket (node:tls). This module gives that handshake
what CPython's ssl would have used: the server name, the certificates the context trusts
(its cafile, capath and cadata; its default paths are SSL_CERT_FILE when set, else
Node's bundled roots, as CPython's are OpenSSL's), whether to verify the chain and the
name, ALPN, versions and a client certificate; and it reports what CPython reports: a
failed verification is an SSLCertVerificationError (CERTIFICATE_VERIFY_FAILED),
getpeercert(), cipher(), version() and selected_alpn_protocol() describe the connection.
"""

import base64
import json
import os
import ssl
import time

from . import pyodide_host

# Node's abbreviations of certificate name fields, as CPython's getpeercert() names them.
_NAME_FIELDS = {"CN": "commonName", "O": "organizationName", "OU": "organizationalUnitName",
                "C": "countryName", "ST": "stateOrProvinceName", "L": "localityName",
                "emailAddress": "emailAddress", "serialNumber": "serialNumber",
                "DC": "domainComponent"}
_SAN_KINDS = {"DNS": "DNS", "IP Address": "IP Address", "email": "email", "URI": "URI"}
_VERSIONS = {ssl.TLSVersion.TLSv1: "TLSv1", ssl.TLSVersion.TLSv1_1: "TLSv1.1",
             ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}

_helpers = []                                 # the JavaScript side's, once installed


def install(helpers, proxy_variables_json):
    """The proxy variables into os.environ, and TLS into the ssl module's classes."""
    _helpers[:] = [helpers]
    os.environ.update(json.loads(proxy_variables_json))
    context, socket_class = ssl.SSLContext, ssl.SSLSocket
    context.load_default_certs = _load_default_certs
    context.set_default_verify_paths = _set_default_verify_paths
    context.load_verify_locations = _load_verify_locations
    context.set_alpn_protocols = _set_alpn_protocols
    context.get_ca_certs = _get_ca_certs
    socket_class._create = classmethod(_create_keeping_timeout(socket_class._create.__func__))
    socket_class.do_handshake = _do_handshake
    socket_class.getpeercert = _getpeercert
    socket_class.cipher = _cipher
    socket_class.version = _version
    socket_class.selected_alpn_protocol = _selected_alpn_protocol


def _load_default_certs(self, purpose=ssl.Purpose.SERVER_AUTH):
    if not isinstance(purpose, ssl._ASN1Object):
        raise TypeError(purpose)
    self._sandbox_defaults = True


def _set_default_verify_paths(self):
    self._sandbox_defaults = True


def _load_verify_locations(self, cafile=None, capath=None, cadata=None):
    if cafile is None and capath is None and cadata is None:
        raise TypeError("cafile, capath and cadata cannot be all omitted")
    found = []
    if cafile is not None:
        found.append(_read_pem(cafile))
    if capath is not None:
        for name in sorted(os.listdir(capath)):
            path = os.path.join(capath, name)
            if os.path.isfile(path):
                text = _read_pem(path)
                if ssl.PEM_HEADER in text:
                    found.append(text)
    if cadata is not None:
        if isinstance(cadata, str):
            found.append(cadata)
        else:                                # bytes are DER, as in CPython
            found.append(ssl.DER_cert_to_PEM_cert(bytes(cadata)))
    for text in found:
        if ssl.PEM_HEADER not in text:
            raise ssl.SSLError(9, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found")
    self._sandbox_cas = getattr(self, "_sandbox_cas", []) + found


def _read_pem(path):
    with open(path, "rb") as f:
        return f.read().decode("latin-1")


def _set_alpn_protocols(self, alpn_protocols):
    protocols = []
    for protocol in alpn_protocols:
        b = protocol.encode("ascii") if isinstance(protocol, str) else bytes(protocol)
        if not 0 < len(b) <= 255:
            raise ssl.SSLError("ALPN protocols must be 1 to 255 in length")
        protocols.append(b.decode("ascii"))
    self._sandbox_alpn = protocols


def _get_ca_certs(self, binary_form=False):
    certificates = []
    for text in getattr(self, "_sandbox_cas", []):
        for block in text.split(ssl.PEM_FOOTER)[:-1]:
            at = block.find(ssl.PEM_HEADER)
            if at >= 0:
                der = ssl.PEM_cert_to_DER_cert(block[at:] + ssl.PEM_FOOTER)
                certificates.append(der if binary_form else {})
    return certificates


def _create_keeping_timeout(create):
    """SSLSocket._create, which takes over the plain socket's descriptor: the new socket
    keeps its timeout (the descriptor stays non-blocking under one), as CPython's does."""
    def _create(cls, sock, server_side=False, do_handshake_on_connect=True,
                suppress_ragged_eofs=True, server_hostname=None, context=None, session=None):
        timeout = sock.gettimeout()
        made = create(cls, sock, server_side=server_side, do_handshake_on_connect=False,
                      suppress_ragged_eofs=suppress_ragged_eofs,
                      server_hostname=server_hostname, context=context, session=session)
        made.settimeout(timeout)
        if server_side:
            made.close()
            raise NotImplementedError("a TLS server is not supported in a wasm session")
        if do_handshake_on_connect:
            try:
                made.do_handshake()
            except BaseException:
                made.close()
                raise
        return made
    return _create


def _tls_options(sock):
    context = sock._context
    verify = context.verify_mode != ssl.CERT_NONE
    options = {"host": sock._server_hostname, "verify": verify,
               "checkHostname": bool(context.check_hostname),
               "alpn": getattr(context, "_sandbox_alpn", None),
               "minVersion": _VERSIONS.get(context.minimum_version),
               "maxVersion": _VERSIONS.get(context.maximum_version),
               "timeout": sock.gettimeout()}
    if verify:
        cas = list(getattr(context, "_sandbox_cas", []))
        roots = False
        if getattr(context, "_sandbox_defaults", False):
            cert_file = os.environ.get("SSL_CERT_FILE")
            if cert_file and os.path.isfile(cert_file):
                cas.append(_read_pem(cert_file))
            else:
                roots = True
        options.update(ca="\n".join(cas) or None, roots=roots)
    certfile = getattr(context, "_certfile_data", None)
    if certfile:
        options.update(cert=certfile, key=getattr(context, "_keyfile_data", None) or certfile,
                       passphrase=_password(getattr(context, "_key_password", None)))
    return options


def _password(password):
    if callable(password):
        password = password()
    if isinstance(password, (bytes, bytearray)):
        password = bytes(password).decode("utf-8")
    return password


def _do_handshake(self, block=False):
    if getattr(self, "_sandbox_tls", None) is not None:
        return
    if not _helpers:
        raise ssl.SSLError(1, "TLS is not available in this session")
    from pyodide.ffi import run_sync       # Pyodide's: imported where it exists
    started = time.monotonic()
    info = json.loads(run_sync(_helpers[0].startTls(self.fileno(), json.dumps(_tls_options(self)))))
    if info.get("interrupted"):
        # A SIGINT came during the handshake: raise it here, in the cell.
        for _ in range(pyodide_host.SIGNAL_CHECK_INTERVAL):
            pass
        pyodide_host.deliver_noted_interrupt()
        raise InterruptedError("the TLS handshake was interrupted")
    if info.get("timedOut"):
        raise TimeoutError("_ssl.c:983: The handshake operation timed out "
                           f"({time.monotonic() - started:.1f} s)")
    if not info["ok"]:
        message = info.get("message") or "the TLS handshake failed"
        if info.get("verifyFailed"):
            error = ssl.SSLCertVerificationError(
                1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
            error.verify_code = 1
            error.verify_message = message
            error.reason = "CERTIFICATE_VERIFY_FAILED"
            raise error
        raise ssl.SSLEOFError(8, f"[SSL: UNEXPECTED_EOF_WHILE_READING] {message}")
    self._sandbox_tls = info


def _getpeercert(self, binary_form=False):
    info = getattr(self, "_sandbox_tls", None)
    if info is None:
        raise ValueError("handshake not done yet")
    cert = info.get("cert")
    if cert is None:
        return None
    if binary_form:
        return base64.b64decode(cert["der"])
    if self._context.verify_mode == ssl.CERT_NONE:
        return {}
    return _certificate_dict(cert)


def _certificate_dict(cert):
    def name(fields):
        out = []
        for key, value in fields.items():
            for one in value if isinstance(value, list) else [value]:
                out.append(((_NAME_FIELDS.get(key, key), one),))
        return tuple(out)

    alt_names = []
    for entry in filter(None, (cert.get("subjectaltname") or "").split(", ")):
        kind, _, value = entry.partition(":")
        alt_names.append((_SAN_KINDS.get(kind, kind), value))
    out = {"subject": name(cert.get("subject") or {}), "issuer": name(cert.get("issuer") or {}),
           "version": 3, "serialNumber": (cert.get("serialNumber") or "").upper(),
           "notBefore": cert.get("valid_from"), "notAfter": cert.get("valid_to")}
    if alt_names:
        out["subjectAltName"] = tuple(alt_names)
    return out


def _cipher(self):
    info = getattr(self, "_sandbox_tls", None)
    if info is None:
        return None
    name, version = info["cipher"]
    bits = 256 if name and ("256" in name or "CHACHA20" in name) else 128
    return (name, version, bits)


def _version(self):
    info = getattr(self, "_sandbox_tls", None)
    return None if info is None else info.get("protocol")


def _selected_alpn_protocol(self):
    info = getattr(self, "_sandbox_tls", None)
    return None if info is None else info.get("alpn")
