# The targets the README and CI use.
PY := .venv/bin/python

.PHONY: install install-all demo test lint bench

install:
	scripts/bootstrap.sh

install-all:
	scripts/bootstrap.sh --all

demo: install
	.venv/bin/crawlfleet demo

test: install-all
	$(PY) -m ruff check src tests examples bench
	$(PY) -m mypy
	$(PY) -m pytest -q

lint:
	$(PY) -m ruff check src tests examples bench
	$(PY) -m ruff format --check src tests examples bench
	$(PY) -m mypy

bench: install-all
	$(PY) bench/crawl_bench.py
