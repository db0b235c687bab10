"""paperworks: ICML 2026 methods as gRPC services. The API stubs live beside their protos."""
