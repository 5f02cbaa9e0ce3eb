"""The demo project.

Its Celery app is loaded with Django, as Celery's Django guide does, so any
process of the project (the web server too) sends tasks with it: with
``DJANGO_TASKS=celery`` a background run started from a request reaches the
broker of ``CELERY_BROKER_URL``.
"""

from project.celery import app as celery_app

__all__ = ["celery_app"]
