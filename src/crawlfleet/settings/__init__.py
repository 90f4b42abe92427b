"""A crawl's settings: one typed object, validated at start-up.

``model.py`` has the keys, their types, defaults and bounds (``Settings``); ``loading.py``
reads them from a TOML file, the environment and flags with one-line errors; ``checks.py``
the checks beyond a key's bounds and the rules between keys; ``domains.py`` and
``proxies.py`` the nested tables ``[crawl.domains]`` and ``[crawl.proxies]``;
``browser.py`` the browser's types.
"""

from crawlfleet.settings.loading import load_settings
from crawlfleet.settings.model import DEFAULT_STRIP_PARAMS, MAX_STEP_S, Rung, Settings

__all__ = ["DEFAULT_STRIP_PARAMS", "MAX_STEP_S", "Rung", "Settings", "load_settings"]
