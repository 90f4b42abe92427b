"""Parsing: link extraction, the default parser, per-site parser plugins and their registry."""

from crawlfleet.parsing.contracts import ContractReport, check_contracts
from crawlfleet.parsing.declarative import selector_parser
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.expect import Expect
from crawlfleet.parsing.links import RobotsMeta, extract_links, robots_meta
from crawlfleet.parsing.loader import ENTRY_POINT_GROUP, load_parsers
from crawlfleet.parsing.plugins import Contract, Follow, ParserSpec, parser
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.parsing.response import Response

__all__ = [
    "ENTRY_POINT_GROUP",
    "Contract",
    "ContractReport",
    "Expect",
    "Follow",
    "Parser",
    "ParserRegistry",
    "ParserSpec",
    "Response",
    "RobotsMeta",
    "check_contracts",
    "default_parser",
    "extract_links",
    "load_parsers",
    "parser",
    "robots_meta",
    "selector_parser",
]
