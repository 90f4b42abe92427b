"""The crawl's own pipeline steps and sinks: ``processors`` and ``sinks`` in the config.

``processors = ["module:function", ...]``: each names a callable ``(Item) -> Item`` that may
raise ``DropItem`` (or ``InvalidItem`` to keep the item as a reject); they run in the order
given, after the built-in cleaning and validation and before deduplication.

``sinks = ["name", ...]``: each names an entry point of the ``crawlfleet.sinks`` group whose
object is a factory ``(SinkOptions) -> Sink``; a crawl writes every stored batch to its own
sink first, then to each of these in order (``FanOutSink``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from crawlfleet.errors import ConfigError
from crawlfleet.models import Item
from crawlfleet.pipeline.protocols import Processor, Sink
from crawlfleet.references import resolve

SINK_GROUP = "crawlfleet.sinks"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a sink factory of the ``crawlfleet.sinks`` group is given (public API).

    ``crawl_id`` names the crawl (tag rows with it); ``state_dir`` is the crawl's state
    directory (a place for the sink's own files); ``postgres_dsn`` is the distributed crawl's
    database, None for an embedded crawl. A sink that needs more reads its own configuration.
    """

    crawl_id: str
    state_dir: Path
    postgres_dsn: str | None = None


def load_processors(references: Sequence[str]) -> list[Processor]:
    """The processors the references name; a ``ConfigError`` names one that is no callable."""
    processors: list[Processor] = []
    for reference in references:
        found = resolve(reference, "processors")
        if not callable(found):
            raise ConfigError(f"processors: {reference!r} is not callable")
        processors.append(found)
    return processors


def load_sinks(names: Sequence[str], options: SinkOptions) -> list[Sink]:
    """The sinks the ``crawlfleet.sinks`` entry points called ``names`` build from ``options``,
    in that order."""
    available = {entry.name: entry for entry in entry_points(group=SINK_GROUP)}
    sinks: list[Sink] = []
    for name in names:
        entry = available.get(name)
        if entry is None:
            known = ", ".join(sorted(available)) or "none installed"
            raise ConfigError(f"sinks: no {SINK_GROUP!r} entry point {name!r} (known: {known})")
        try:
            factory = entry.load()
            sink = factory(options)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"sinks: entry point {name!r} failed: {exc}") from None
        if not (callable(getattr(sink, "write", None)) and callable(getattr(sink, "close", None))):
            raise ConfigError(f"sinks: entry point {name!r} did not build a sink")
        sinks.append(sink)
    return sinks


class FanOutSink:
    """Writes each batch to ``primary``, then to every one of ``others`` in order.

    A batch is durable once every sink took it; an exception from any of them means it may
    be written again (the page is retried), so the other sinks should upsert by (type, key)
    as the built-in ones do.
    """

    def __init__(self, primary: Sink, others: Sequence[Sink]) -> None:
        self._sinks = (primary, *others)

    async def write(self, items: Sequence[Item]) -> None:
        for sink in self._sinks:
            await sink.write(items)

    async def close(self) -> None:
        """Close ``others`` (``primary`` belongs to whoever opened it); the first error is
        raised once all were closed."""
        error: Exception | None = None
        for sink in self._sinks[1:]:
            try:
                await sink.close()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error
