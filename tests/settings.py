"""Settings for the app's own test suite: only what ``llm_conversations`` needs.

SQLite by default; ``DATABASE_URL`` switches to PostgreSQL, e.g.
``postgres://postgres@127.0.0.1:5432/test``, as in the demo's settings. The
demo's own tests run on the demo's settings instead.
"""

import os
import tempfile
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = False
# Uploaded attachments go to a directory of their own, never the checkout.
MEDIA_ROOT = tempfile.mkdtemp(prefix="llm-conversations-media-")
SECRET_KEY = "insecure-key-for-the-test-suite-only"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "llm_conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tests.urls"

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
        os.environ.get("DATABASE_URL") or "sqlite://:memory:",
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # As in the demo: IMMEDIATE transactions serialise writers up front instead
    # of failing with "database is locked" in the concurrency tests.
    DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file (in memory where /dev/shm exists), not SQLite's shared-cache memory
    # database: threads of one run (the loop, its provider's stream, a cancel)
    # then wait on its locks as they do on a real database, instead of failing
    # with "table is locked".
    TEST_DIR = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    DATABASES["default"]["TEST"] = {"NAME": str(TEST_DIR / f"llmconv-tests-{os.getpid()}.sqlite3")}

# Users are created, and passwords checked, in many tests.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "llm_conversations API",
    "VERSION": "1.0.0",
    # The schema tests check both 3.1 (this) and drf-spectacular's default 3.0.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

LLM_CONVERSATIONS = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {"echo": {"BACKEND": "echo", "MODEL": "echo"}},
    "TOOLS": [
        "tests.support.loop_tools.get_weather",
        "tests.support.loop_tools.get_time",
        "tests.support.loop_tools.delete_file",
        "tests.support.loop_tools.pick_color",
    ],
}
