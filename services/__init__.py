"""One package per service."""
