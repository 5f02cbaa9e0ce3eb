# `make run` starts the demo on SQLite: the web server, a task worker and the
# reaper together (project/run.py; Ctrl-C stops all three). `make test` runs the
# app's suite (tests/, on tests.settings) and then the demo's (project/tests/,
# on project.settings).
# PYTHON and VENV select another interpreter, e.g.
#   make test PYTHON=python3.13 VENV=.venv-py313
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install run test lint typecheck docs bench wheel-check clean FORCE

# requirements.txt installs the app editable in strict mode, a tree of links to
# the package's files: when a file is added to or removed from the package, the
# list below changes and the next make installs again to link it (the list is
# written through a file of the shell's own, for makes running side by side).
PACKAGE_FILES := $(VENV)/.package-files
$(PACKAGE_FILES): FORCE
	@mkdir -p $(@D)
	@find llm_conversations -name __pycache__ -prune -o -type f -print | LC_ALL=C sort >$@.$$$$ && \
		if cmp -s $@.$$$$ $@; then rm $@.$$$$; else mv $@.$$$$ $@; fi

$(BIN)/.installed: requirements.txt pyproject.toml $(PACKAGE_FILES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

# npm packages, each at the exact version of its package-lock.json. tests/ holds
# the ones the tests run: the reference MCP server the MCP tests start, the AI
# SDK (`ai`) whose own parser reads our streams and AG-UI's schemas and client
# (`@ag-ui/core`, `@ag-ui/client`) that read our AG-UI streams (the scripts of
# tests/node/ drive those two). examples/react-chat/ is the React example
# (useChat) that the demo serves and a browser test drives. Without npm nothing
# is installed: those tests skip, and fail under CI=true.
NODE_MODULES := tests/node_modules/.package-lock.json examples/react-chat/node_modules/.package-lock.json
REACT_EXAMPLE := examples/react-chat/dist/app.js

%/node_modules/.package-lock.json: %/package.json %/package-lock.json
	if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $* --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the tests that need $*/node_modules will skip (CI=true: fail)"; \
	fi

$(REACT_EXAMPLE): examples/react-chat/node_modules/.package-lock.json examples/react-chat/src/main.jsx
	if command -v npm >/dev/null 2>&1; then npm run --silent --prefix examples/react-chat build; fi

install: $(BIN)/.installed $(NODE_MODULES) $(REACT_EXAMPLE)

# DEBUG is off unless DJANGO_DEBUG=1; local use turns it on (whitenoise then
# serves static files from the apps without collectstatic).
run: export DJANGO_DEBUG = 1
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo
	$(BIN)/python -m project.run 127.0.0.1:8000

# `make test COVERAGE=1` also measures the app's suite's coverage of the package:
# the lines no test runs are listed, and a total under the floor of
# pyproject.toml ([tool.coverage.report] fail_under) fails the run. CI measures
# one suite (Python 3.13, SQLite), so the others keep their speed.
COVERAGE_ARGS := $(if $(COVERAGE),--cov --cov-report=term-missing:skip-covered)

test: install
	$(BIN)/python -m pytest $(COVERAGE_ARGS)
	$(BIN)/python -m pytest project/tests --ds=project.settings

# Every hook of .pre-commit-config.yaml on every file (django-upgrade, ruff check,
# ruff format, mypy, lint-imports; a hook that changes a file fails), then the
# migrations check. `make typecheck` is mypy alone.
lint: install
	$(BIN)/pre-commit run --all-files --show-diff-on-failure
	$(BIN)/python manage.py makemigrations --check --dry-run

typecheck: install
	$(BIN)/mypy

# The documentation site (mkdocs.yml) into site/; --strict makes every warning,
# a broken link or anchor, a page missing from the nav, an error.
docs: install
	$(BIN)/mkdocs build --strict --quiet

bench: install
	for script in bench/*.py; do $(BIN)/python $$script || exit 1; done

wheel-check: install
	bash .ci/wheel-check $(BIN)/python

clean:
	rm -rf $(VENV) .venv-py312 .venv-py313 build dist site *.egg-info db.sqlite3 test-artifacts .coverage \
		tests/node_modules examples/react-chat/node_modules examples/react-chat/dist

FORCE:
