"""Settings of the demo project.

Everything comes from environment variables: SQLite, the echo provider (no
API key needed), and DEBUG off unless ``DJANGO_DEBUG=1`` (``make run`` sets it).
``DATABASE_URL`` switches to PostgreSQL, e.g. ``postgres://postgres@127.0.0.1:5432/test``;
there ``DJANGO_DB_POOL=N`` gives each process a pool of at most N connections
(advised under ASGI, see docs/deployment.md).

Static files are served by whitenoise. With DEBUG on it finds them in the apps'
``static/`` directories; with DEBUG off (e.g. under gunicorn) it serves
``STATIC_ROOT``, so run ``python manage.py collectstatic --noinput`` first.

Background runs go to a task worker: the database backend (``manage.py
llm_worker``, started by ``make run``) unless ``DJANGO_TASKS=rq``, which queues
them in Redis (``REDIS_URL``, default ``redis://127.0.0.1:6379/0``) for
``manage.py rqworker`` processes, or ``DJANGO_TASKS=celery``, which queues them for
``DJANGO_TASKS=celery celery -A project worker --pool threads`` (project/celery.py,
loaded by project/__init__.py). See docs/deployment.md.
"""

import os
from pathlib import Path

import dj_database_url
import django

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", False)
# The fallback key is for local development only; set DJANGO_SECRET_KEY anywhere else.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-demo-key-for-local-use-only")
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and Redoc from local static files, not a CDN: /api/docs/ works offline.
    "drf_spectacular_sidecar",
    "llm_conversations",
    "project",
    # The task queue in the database: its tables and `manage.py llm_worker`.
    "django_tasks_db",
]
if django.VERSION < (6, 0):
    # Django 5.2: the Tasks framework is the django-tasks backport, an app of its own.
    INSTALLED_APPS.insert(INSTALLED_APPS.index("django_tasks_db"), "django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # Persistent connections only where asked: under ASGI every request and
        # every waiting event stream would keep one open (Django's docs advise 0).
        conn_max_age=int(os.environ.get("DJANGO_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions serialise writers up front instead of failing
    # with "database is locked" when two appenders upgrade their locks.
    DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif os.environ.get("DJANGO_DB_POOL"):
    # A connection pool per process (psycopg_pool, Django 5.1+): under ASGI
    # every request's thread takes a connection from it and gives it back,
    # instead of connecting anew (CONN_MAX_AGE 0) or keeping one per thread.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "pool": {"min_size": 2, "max_size": int(os.environ["DJANGO_DB_POOL"]), "timeout": 10}
    }

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
LOGIN_URL = "admin:login"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Uploaded attachments (the default storage); served only through the API.
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT", BASE_DIR / "media"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies from collectstatic, and no manifest: {% static %} works
    # in tests and under runserver without collectstatic having run.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The API sets its own error handler, permissions and parsers; the project
# only picks the schema class and how people log in to the demo: the session of
# /admin/. Not HTTP basic auth, which checks the password, a PBKDF2 hash costing
# some 0.3 s of CPU, on every request (docs/api.md#security).
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "llm_conversations API",
    "DESCRIPTION": "Conversations, messages, runs of the tool loop and tools. See docs/api.md.",
    "VERSION": "1.0.0",
    # 3.1 can say that each event's data is JSON text of a given schema.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI (/api/docs/) and Redoc from drf-spectacular-sidecar's pinned copies.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"llm_conversations": {"handlers": ["console"], "level": "INFO"}},
}

# The echo provider needs no key. A hosted provider is configured only when its
# key is in the environment, so the system checks stay quiet without keys.
PROVIDERS: dict[str, dict[str, object]] = {"echo": {"BACKEND": "echo", "MODEL": "echo"}}
if os.environ.get("OPENAI_API_KEY"):
    PROVIDERS["openai"] = {
        "BACKEND": "openai",
        "MODEL": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        "API_KEY": os.environ["OPENAI_API_KEY"],
        "BASE_URL": os.environ.get("OPENAI_BASE_URL"),
    }
if os.environ.get("ANTHROPIC_API_KEY"):
    PROVIDERS["anthropic"] = {
        "BACKEND": "anthropic",
        "MODEL": os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
        "API_KEY": os.environ["ANTHROPIC_API_KEY"],
    }
if os.environ.get("GEMINI_API_KEY"):
    PROVIDERS["gemini"] = {
        "BACKEND": "gemini",
        "MODEL": os.environ.get("GEMINI_MODEL", "gemini-2.5-flash"),
        "API_KEY": os.environ["GEMINI_API_KEY"],
    }
if os.environ.get("OLLAMA_MODEL"):
    PROVIDERS["ollama"] = {
        "BACKEND": "ollama",
        "MODEL": os.environ["OLLAMA_MODEL"],
        "BASE_URL": os.environ.get("OLLAMA_BASE_URL", "http://127.0.0.1:11434"),
    }

# Django's Tasks framework: where background runs (and the reaping and pruning
# tasks) are queued. The database backend needs nothing more than the database.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
if os.environ.get("DJANGO_TASKS") == "rq":
    # The scale-out path: RQ workers on Redis (`manage.py rqworker default`).
    INSTALLED_APPS.append("django_rq")
    RQ_QUEUES = {
        "default": {
            "URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
            # RQ stops a job after DEFAULT_TIMEOUT (180 s unless set): allow a
            # whole run, RUN_TIMEOUT (900 s by default), and more.
            "DEFAULT_TIMEOUT": 1800,
        }
    }
    # Workers run the Tasks framework's jobs through django-tasks-rq's job class.
    RQ = {"JOB_CLASS": "django_tasks_rq.backend.Job"}
    TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}
elif os.environ.get("DJANGO_TASKS") == "celery":
    # Celery workers on Redis (`DJANGO_TASKS=celery celery -A project worker --pool threads`).
    CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    # The queue name of the Tasks framework is Celery's queue (`-Q default`).
    CELERY_TASK_DEFAULT_QUEUE = "default"
    # A message not acknowledged within this is delivered again: longer than a
    # whole run (RUN_TIMEOUT, 900 s by default); the run's claim refuses a repeat.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 1800}
    TASKS = {"default": {"BACKEND": "llm_conversations.tasks.celery.CeleryBackend"}}

LLM_CONVERSATIONS = {
    "DEFAULT_PROVIDER": os.environ.get("LLM_PROVIDER", "echo"),
    "PROVIDERS": PROVIDERS,
    # Automatic titles from the same provider (the echo backend titles a
    # conversation with its first question).
    "TITLE_PROVIDER": os.environ.get("LLM_PROVIDER", "echo"),
    "TOOLS": [
        "project.tools.get_weather",
        "project.tools.get_time",
        "project.tools.convert_currency",
        "project.tools.send_email",
    ],
    # The chat page streams each run from the request that starts it. Runs
    # started with background=True (and failed runs requeued from the admin)
    # are executed by the task worker `make run` starts.
    "BACKGROUND_RUNS": False,
    # A development tool: its users see the reasoning text of reasoning models.
    "SHOW_REASONING": True,
}
