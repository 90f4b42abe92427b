def deepest(html: bytes, stop_above: int, /) -> int:
    """The deepest nesting of ``html``'s tags, or the first depth above ``stop_above``
    (``_nesting.c`` says how tags are read)."""
