"""TLS for gRPC from settings: the server's certificate, optional mutual TLS, and the
matching client credentials.

A server with PAPERWORKS_TLS_CERT_FILE and PAPERWORKS_TLS_KEY_FILE serves TLS only
(no plaintext port beside it); with PAPERWORKS_TLS_CLIENT_CA_FILE as well, it
refuses any client without a certificate that CA signed. A client with
PAPERWORKS_TLS_CA_FILE connects over TLS, verifying the server against that CA,
and presents PAPERWORKS_TLS_CLIENT_CERT_FILE / _KEY_FILE when they are set.
Settings that cannot work together fail at startup, naming the setting.
"""
from __future__ import annotations

from pathlib import Path

import grpc
from paperworks.shared.config import Settings


class TLSConfigError(ValueError):
    """A TLS setting is missing its pair or names an unreadable file."""


def _read(path: Path | None, setting: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"PAPERWORKS_{setting.upper()}={path}: {exc.strerror}") from None


def _pair(settings: Settings, cert: str, key: str) -> tuple[bytes, bytes] | None:
    cert_path, key_path = getattr(settings, cert), getattr(settings, key)
    if (cert_path is None) != (key_path is None):
        missing = key if cert_path is not None else cert
        raise TLSConfigError(f"PAPERWORKS_{missing.upper()} must be set with "
                             f"PAPERWORKS_{(cert if missing == key else key).upper()}")
    if cert_path is None:
        return None
    return _read(cert_path, cert), _read(key_path, key)


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """The server's TLS credentials, or None for plaintext (no certificate configured)."""
    pair = _pair(settings, "tls_cert_file", "tls_key_file")
    if pair is None:
        if settings.tls_client_ca_file is not None:
            raise TLSConfigError("PAPERWORKS_TLS_CLIENT_CA_FILE needs PAPERWORKS_TLS_CERT_FILE and "
                                 "PAPERWORKS_TLS_KEY_FILE (mutual TLS is TLS first)")
        return None
    cert, key = pair
    client_ca = _read(settings.tls_client_ca_file, "tls_client_ca_file")
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def channel_credentials(settings: Settings) -> grpc.ChannelCredentials | None:
    """A client's TLS credentials, or None for a plaintext channel (no CA configured)."""
    if settings.tls_ca_file is None:
        if settings.tls_client_cert_file is not None or settings.tls_client_key_file is not None:
            raise TLSConfigError("PAPERWORKS_TLS_CLIENT_CERT_FILE needs PAPERWORKS_TLS_CA_FILE "
                                 "(a client certificate is only sent over TLS)")
        return None
    ca = _read(settings.tls_ca_file, "tls_ca_file")
    cert, key = _pair(settings, "tls_client_cert_file", "tls_client_key_file") or (None, None)
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def channel(address: str, credentials: grpc.ChannelCredentials | None, options=None) -> grpc.Channel:
    """A blocking channel, TLS when `credentials` is set."""
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials, options=options)


def aio_channel(address: str, credentials: grpc.ChannelCredentials | None,
                options=None) -> grpc.aio.Channel:
    """An asyncio channel, TLS when `credentials` is set."""
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, credentials, options=options)
