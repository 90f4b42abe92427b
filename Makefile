# The targets the README and CI use.
PY := .venv/bin/python

.PHONY: install install-all demo test lint bench check-install

install:
	scripts/bootstrap.sh

install-all:
	scripts/bootstrap.sh --all

demo: install
	.venv/bin/crawlfleet demo --parsers examples/shop/parsers.py,examples/quotes/parsers.py

test: install-all
	$(PY) -m ruff check src tests examples bench
	$(PY) -m mypy
	.venv/bin/lint-imports --no-cache
	$(PY) -m pytest -q

lint:
	$(PY) -m ruff check src tests examples bench
	$(PY) -m ruff format --check src tests examples bench
	$(PY) -m mypy
	.venv/bin/lint-imports --no-cache

bench: install-all
	$(PY) bench/crawl_bench.py

# A fresh venv per install kind, outside the tree, crawling the demo site (also run by the
# test suite: tests/e2e/test_clean_install.py).
check-install:
	scripts/check_clean_install.sh
