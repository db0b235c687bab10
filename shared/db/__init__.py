"""Persistence: the database is the source of truth for jobs, events and the outbox."""
