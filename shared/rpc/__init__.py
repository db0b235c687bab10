"""The gRPC runtime every service shares: bootstrap, auth, errors, jobs surface."""
