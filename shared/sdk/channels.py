"""Client channels: plaintext, or TLS (optionally mutual) from the client's TLS files.

The server half (its certificate, client-certificate checks) is `paperworks.shared.rpc.tls`.
"""
from __future__ import annotations

from pathlib import Path

import grpc


class TLSConfigError(ValueError):
    """A TLS setting is missing its pair or names an unreadable file."""


def read_pem(path: Path | None, setting: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"PAPERWORKS_{setting.upper()}={path}: {exc.strerror}") from None


def pem_pair(config, cert: str, key: str) -> tuple[bytes, bytes] | None:
    """The (certificate, key) files `config` names under attributes `cert` and `key`, or None."""
    cert_path, key_path = getattr(config, cert), getattr(config, key)
    if (cert_path is None) != (key_path is None):
        missing = key if cert_path is not None else cert
        raise TLSConfigError(f"PAPERWORKS_{missing.upper()} must be set with "
                             f"PAPERWORKS_{(cert if missing == key else key).upper()}")
    if cert_path is None:
        return None
    return read_pem(cert_path, cert), read_pem(key_path, key)


def channel_credentials(config) -> grpc.ChannelCredentials | None:
    """A client's TLS credentials, or None for a plaintext channel (no CA configured)."""
    if config.tls_ca_file is None:
        if config.tls_client_cert_file is not None or config.tls_client_key_file is not None:
            raise TLSConfigError("PAPERWORKS_TLS_CLIENT_CERT_FILE needs PAPERWORKS_TLS_CA_FILE "
                                 "(a client certificate is only sent over TLS)")
        return None
    ca = read_pem(config.tls_ca_file, "tls_ca_file")
    cert, key = pem_pair(config, "tls_client_cert_file", "tls_client_key_file") or (None, None)
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
