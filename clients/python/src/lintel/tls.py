"""TLS contexts for a worker or a producer: the node's CA, and a client certificate for
mutual TLS."""

from __future__ import annotations

import ssl


def client_context(ca: str | None = None, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """A context that verifies the node against ``ca`` (PEM file; the system's CAs when
    ``None``) and, with ``cert`` and ``key``, presents a client certificate (mutual TLS)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context
