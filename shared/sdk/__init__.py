"""The light client: the Python SDK and the `paperworks` CLI.

Imports only the generated stubs and light libraries (grpcio, protobuf, typer, rich), so
`pip install paperworks` without the `server` extra is enough to use a remote stack.
"""
