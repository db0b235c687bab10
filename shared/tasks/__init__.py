"""Execution: the Celery app of each service's worker pool and the job runner."""
