"""The web console: a browser's view of every service's jobs (`paperworks console`).

A client of the public gRPC API only (the SDK's AsyncClient with the token the person pasted),
so a tenant sees exactly what it sees over gRPC. `app.create_app` builds the ASGI app.
"""
