"""The distributed runtime: a Celery app, its tasks, workers and the dispatcher (decision 0006)."""
