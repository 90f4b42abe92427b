"""``python -m crawlfleet``: the same as the ``crawlfleet`` command."""

from crawlfleet.cli.main import app

app()
