"""The crawl's archive: every response fetched, kept as WARC/1.1, indexed, and parsed again.

``protocols`` holds the ports the fetchers and the runtime see; ``warc`` writes the files,
``index`` finds a capture in them, ``keeper`` decides what a response becomes (a ``response``
record or a ``revisit``), ``reading`` reads records back and ``reparse`` runs parsers over them.
"""
