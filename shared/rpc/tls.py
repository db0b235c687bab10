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

import grpc
from paperworks.shared.config import Settings
from paperworks.shared.sdk.channels import (  # noqa: F401 - the client half, re-exported
    TLSConfigError,
    aio_channel,
    channel,
    channel_credentials,
)
from paperworks.shared.sdk.channels import pem_pair as _pair
from paperworks.shared.sdk.channels import read_pem as _read


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
