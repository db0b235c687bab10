"""Kafka: the outbox relay publishes job intake and events; dispatchers consume intake."""
