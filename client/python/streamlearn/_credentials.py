"""Credentials: how the client proves who it is to a streamlearn server, and checks the server
(docs/SECURITY.md), as the C++ client does (client/lib/credentials.h):

- a bearer token, sent as the metadata ``authorization: Bearer <token>`` on every call, unary
  and streaming (the server maps it to a principal: a tenant and roles);
- TLS: the server's certificate checked against ``tls_ca`` (the system's roots when None),
  and with ``tls_cert`` / ``tls_key`` a client certificate (mTLS: the server may map its
  identity to a principal instead of a token).

    creds = Credentials.make(token="s3cret", tls_ca="ca.crt")
    creds.check_transport("sl-0.example:50051")     # TokenInClear over plaintext off loopback
    channel = creds.channel("sl-0.example:50051", options=[...])

A token over plaintext is refused unless the address is a loopback one (or a unix socket): a
token in clear on a network is anyone's.

Thread safety: a Credentials is immutable; channel() may be called from any thread.
"""

import collections
import ipaddress
import os
from typing import Any, List, Optional, Sequence, Tuple

import grpc

from . import errors

__all__ = ["Credentials", "TOKEN_ENV", "is_loopback"]

# The environment variable a Client takes its token from when none is given.
TOKEN_ENV = "STREAMLEARN_TOKEN"

_AUTHORIZATION = "authorization"


def is_loopback(address: str) -> bool:
    """True when `address` (host:port, [v6]:port, ipv4:/ipv6: prefixed, or a unix socket) is
    on this machine: localhost, 127.0.0.0/8, ::1, unix:..."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host = address.rsplit(":", 1)[0] if ":" in address else address
    for prefix in ("ipv4:", "ipv6:"):
        if host.startswith(prefix):
            host = host[len(prefix):]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read(what: str, path: str) -> bytes:
    """The bytes of a PEM file; OSError naming `what` and the path when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise type(e)(e.errno, f"{what} {path!r}: cannot read: {e.strerror}") from None


class _CallDetails(collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                         "compression")), grpc.ClientCallDetails):
    """A call's details with metadata added (grpc.ClientCallDetails is an interface)."""


class _TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                        grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ("authorization", "Bearer <token>") to the metadata of every call."""

    def __init__(self, token: str) -> None:
        self._header = (_AUTHORIZATION, "Bearer " + token)

    def __repr__(self) -> str:
        return "_TokenInterceptor(<token hidden>)"

    def _with_token(self, details: grpc.ClientCallDetails) -> _CallDetails:
        metadata: List[Tuple[str, Any]] = [
            (k, v) for k, v in (details.metadata or ()) if k != _AUTHORIZATION]
        metadata.append(self._header)
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None),
                            getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_token(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_token(client_call_details), request_iterator)


class Credentials:
    """A token and/or TLS settings, with the files read (Credentials.make); makes channels.

    Attributes: tls (bool), server_name (the name checked in the server's certificate, or
    None: the address's host), has_token (bool; the token itself is not exposed).
    """

    def __init__(self, *, token: Optional[str] = None, tls: bool = False,
                 root_certificates: Optional[bytes] = None,
                 private_key: Optional[bytes] = None,
                 certificate_chain: Optional[bytes] = None,
                 server_name: Optional[str] = None) -> None:
        self.tls = tls
        self.server_name = server_name
        self._token = token or None
        self._ssl = (grpc.ssl_channel_credentials(root_certificates, private_key,
                                                  certificate_chain) if tls else None)
        self._interceptor = _TokenInterceptor(token) if token else None

    @classmethod
    def make(cls, *, token: Optional[str] = None, tls: bool = False,
             tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
             tls_key: Optional[str] = None, tls_server_name: Optional[str] = None
             ) -> "Credentials":
        """The credentials of Client's keyword arguments, with the files read now.

        token None: $STREAMLEARN_TOKEN if set (surrounding whitespace dropped); "" : none.
        TLS is on with tls=True or any tls_* file. Raises ValueError for a certificate
        without its key (or the reverse) or a token that cannot be a header value, OSError
        (FileNotFoundError, PermissionError) naming a file that cannot be read.
        """
        if token is None:
            token = os.environ.get(TOKEN_ENV, "")
        token = token.strip()
        if token and not all(" " <= c <= "~" for c in token):
            raise ValueError("the token has characters a gRPC header cannot carry (printable "
                             "ASCII only)")
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("a client certificate needs its key: give both tls_cert and "
                             "tls_key")
        tls = bool(tls or tls_ca or tls_cert or tls_key)
        if tls_server_name is not None and not tls:
            raise ValueError("tls_server_name needs TLS (tls=True or tls_ca=...)")
        root = _read("CA file", tls_ca) if tls_ca else None
        chain = _read("client certificate", tls_cert) if tls_cert else None
        key = _read("client key", tls_key) if tls_key else None
        return cls(token=token or None, tls=tls, root_certificates=root, private_key=key,
                   certificate_chain=chain, server_name=tls_server_name or None)

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def __repr__(self) -> str:
        return (f"Credentials(token={'<hidden>' if self._token else None}, tls={self.tls}, "
                f"server_name={self.server_name!r})")

    def check_transport(self, address: str) -> None:
        """Raises errors.TokenInClear when a token would go in clear to `address`: no TLS and
        a host that is not loopback."""
        if self._token and not self.tls and not is_loopback(address):
            raise errors.TokenInClear(
                f"refusing to send a token in clear to {address}: use TLS (tls=True, "
                f"tls_ca=...) or a loopback address", grpc.StatusCode.FAILED_PRECONDITION,
                {"address": address})

    def channel(self, address: str, options: Sequence[Tuple[str, Any]] = ()) -> grpc.Channel:
        """A channel to `address` with these credentials: TLS or plaintext, the server name
        override, the token on every call. Raises errors.TokenInClear (check_transport)."""
        self.check_transport(address)
        options = list(options)
        if self._ssl is not None:
            if self.server_name:
                options.append(("grpc.ssl_target_name_override", self.server_name))
            channel = grpc.secure_channel(address, self._ssl, options=options)
        else:
            channel = grpc.insecure_channel(address, options=options)
        if self._interceptor is not None:
            channel = grpc.intercept_channel(channel, self._interceptor)
        return channel
