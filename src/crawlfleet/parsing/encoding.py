"""The character encoding of a fetched page, found and applied as a browser does.

Labels are read with the WHATWG Encoding Standard's label table (every label of its
encodings.json; a label outside it is ignored, as a browser ignores ``utf-7`` or ``cp037``),
and each encoding decodes as the standard's decoder does (``replacement`` gives one U+FFFD,
``x-user-defined`` maps 0x80-0xFF to U+F780-U+F7FF, a windows-125x byte with no character is
the C1 control of the same number). The order (HTML §13.2.3.2): a byte order mark; the
``charset`` of ``Content-Type``; for HTML, the prescan of the first 1024 bytes for a ``<meta>``,
then a ``<meta>`` found later in the document (the parser's "change the encoding"); bytes that
are valid UTF-8 are UTF-8; anything else goes to Firefox's detector, chardetng (decision 0041).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from chardetng_py import detect as _chardetng

from crawlfleet.models import FetchResult

PRESCAN_BYTES = 1024
DETECT_BYTES = 64 * 1024

# Each WHATWG encoding: (the Python codec that decodes it, its labels). Multi-byte decoders,
# checked against the standard's indexes: euc-kr is the UHC superset (cp949: all 17,048 codes
# agree), shift_jis is Microsoft's (cp932: all 7,724), gbk decodes as gb18030 (20 of 23,940
# two-byte codes fixed after Python's decode), euc-jp is read through cp932 (below), big5 is
# big5hkscs (203 of 18,590 HKSCS codes Python lacks decode to U+FFFD).
_ENCODINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "utf-8": ("utf-8", ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
                         "x-unicode20utf8")),
    "ibm866": ("cp866", ("866", "cp866", "csibm866", "ibm866")),
    "iso-8859-2": ("iso8859_2", ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2",
                                 "iso88592", "iso_8859-2", "iso_8859-2:1987", "l2", "latin2")),
    "iso-8859-3": ("iso8859_3", ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3",
                                 "iso88593", "iso_8859-3", "iso_8859-3:1988", "l3", "latin3")),
    "iso-8859-4": ("iso8859_4", ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4",
                                 "iso88594", "iso_8859-4", "iso_8859-4:1988", "l4", "latin4")),
    "iso-8859-5": ("iso8859_5", ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144",
                                 "iso8859-5", "iso88595", "iso_8859-5", "iso_8859-5:1988")),
    "iso-8859-6": ("iso8859_6", ("arabic", "asmo-708", "csiso88596e", "csiso88596i",
                                 "csisolatinarabic", "ecma-114", "iso-8859-6", "iso-8859-6-e",
                                 "iso-8859-6-i", "iso-ir-127", "iso8859-6", "iso88596",
                                 "iso_8859-6", "iso_8859-6:1987")),
    "iso-8859-7": ("iso8859_7", ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8",
                                 "iso-8859-7", "iso-ir-126", "iso8859-7", "iso88597",
                                 "iso_8859-7", "iso_8859-7:1987", "sun_eu_greek")),
    "iso-8859-8": ("iso8859_8", ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8",
                                 "iso-8859-8-e", "iso-ir-138", "iso8859-8", "iso88598",
                                 "iso_8859-8", "iso_8859-8:1988", "visual")),
    "iso-8859-8-i": ("iso8859_8", ("csiso88598i", "iso-8859-8-i", "logical")),
    "iso-8859-10": ("iso8859_10", ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10",
                                   "iso885910", "l6", "latin6")),
    "iso-8859-13": ("iso8859_13", ("iso-8859-13", "iso8859-13", "iso885913")),
    "iso-8859-14": ("iso8859_14", ("iso-8859-14", "iso8859-14", "iso885914")),
    "iso-8859-15": ("iso8859_15", ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915",
                                   "iso_8859-15", "l9")),
    "iso-8859-16": ("iso8859_16", ("iso-8859-16",)),
    "koi8-r": ("koi8_r", ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r")),
    "koi8-u": ("koi8_u", ("koi8-ru", "koi8-u")),
    "macintosh": ("mac_roman", ("csmacintosh", "mac", "macintosh", "x-mac-roman")),
    "windows-874": ("cp874", ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620",
                              "windows-874")),
    "windows-1250": ("cp1250", ("cp1250", "windows-1250", "x-cp1250")),
    "windows-1251": ("cp1251", ("cp1251", "windows-1251", "x-cp1251")),
    "windows-1252": ("cp1252", ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1",
                                "ibm819", "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591",
                                "iso_8859-1", "iso_8859-1:1987", "l1", "latin1", "us-ascii",
                                "windows-1252", "x-cp1252")),
    "windows-1253": ("cp1253", ("cp1253", "windows-1253", "x-cp1253")),
    "windows-1254": ("cp1254", ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148",
                                "iso8859-9", "iso88599", "iso_8859-9", "iso_8859-9:1989", "l5",
                                "latin5", "windows-1254", "x-cp1254")),
    "windows-1255": ("cp1255", ("cp1255", "windows-1255", "x-cp1255")),
    "windows-1256": ("cp1256", ("cp1256", "windows-1256", "x-cp1256")),
    "windows-1257": ("cp1257", ("cp1257", "windows-1257", "x-cp1257")),
    "windows-1258": ("cp1258", ("cp1258", "windows-1258", "x-cp1258")),
    "x-mac-cyrillic": ("mac_cyrillic", ("x-mac-cyrillic", "x-mac-ukrainian")),
    "gbk": ("gb18030", ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312",
                        "gb_2312-80", "gbk", "iso-ir-58", "x-gbk")),
    "gb18030": ("gb18030", ("gb18030",)),
    "big5": ("big5hkscs", ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5")),
    "euc-jp": ("euc_jp", ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp")),
    "iso-2022-jp": ("iso2022_jp_ext", ("csiso2022jp", "iso-2022-jp")),
    "shift_jis": ("cp932", ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
                            "windows-31j", "x-sjis")),
    "euc-kr": ("cp949", ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean",
                         "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601",
                         "windows-949")),
    "replacement": ("utf-8", ("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext",
                              "iso-2022-kr", "replacement")),
    "utf-16be": ("utf-16-be", ("unicodefffe", "utf-16be")),
    "utf-16le": ("utf-16-le", ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff",
                              "utf-16", "utf-16le")),
    "x-user-defined": ("cp1252", ("x-user-defined",)),
}  # fmt: skip
LABELS: dict[str, str] = {
    label: name for name, (_, labels) in _ENCODINGS.items() for label in labels
}
_ASCII_WHITESPACE = "\t\n\f\r "
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16be"),
    (codecs.BOM_UTF16_LE, "utf-16le"),
)


def _single_byte_table(name: str, fixes: dict[int, str]) -> str:
    """A 256-character decoding table: the Python codec's, where it has no character the C1
    control of the same number (windows-125x, windows-874 in the standard), then ``fixes``."""
    codec = _ENCODINGS[name][0]
    chars = []
    for byte in range(256):
        try:
            char = bytes([byte]).decode(codec)
        except UnicodeDecodeError:
            char = chr(byte) if 0x80 <= byte <= 0x9F else "\ufffe"  # U+FFFE: no character
        chars.append(fixes.get(byte, char))
    return "".join(chars)


# Where the standard's index differs from the Python codec (checked byte by byte against
# index-*.txt): undefined C1 bytes of the windows code pages, U+05BA in windows-1255, and
# KOI8-U being KOI8-RU (0xAE, 0xBE).
_TABLES: dict[str, str] = {
    **{
        name: _single_byte_table(name, {0xCA: "\u05ba"} if name == "windows-1255" else {})
        for name in _ENCODINGS
        if name.startswith("windows-")
    },
    "koi8-u": _single_byte_table("koi8-u", {0xAE: "\u045e", 0xBE: "\u040e"}),
    "x-user-defined": "".join(chr(b) if b < 0x80 else chr(0xF780 + b - 0x80) for b in range(256)),
}


# gb18030: two-byte codes Python maps to the Private Use Area (GB18030-2005) and the standard
# to the characters GB18030-2022 gives them.
_GB18030_FIXES = {
    0xE5E5: 0x3000, 0xE78D: 0xFE10, 0xE78E: 0xFE12, 0xE78F: 0xFE11, 0xE790: 0xFE13,
    0xE791: 0xFE14, 0xE792: 0xFE15, 0xE793: 0xFE16, 0xE794: 0xFE17, 0xE795: 0xFE18,
    0xE796: 0xFE19, 0xE7C7: 0x1E3F, 0xE81E: 0x9FB4, 0xE826: 0x9FB5, 0xE82B: 0x9FB6,
    0xE82C: 0x9FB7, 0xE832: 0x9FB8, 0xE843: 0x9FB9, 0xE854: 0x9FBA, 0xE864: 0x9FBB,
}  # fmt: skip
# euc-jp, cut into runs the standard's decoder reads alike: ASCII, half-width katakana,
# JIS X 0212 (three bytes), JIS X 0208 (two bytes), or a byte that starts nothing.
_EUC_JP_RUNS = re.compile(
    rb"([\x00-\x7f]+)|((?:\x8e[\xa1-\xdf])+)|((?:\x8f[\xa1-\xfe][\xa1-\xfe])+)"
    rb"|((?:[\xa1-\xfe][\xa1-\xfe])+)|(.)",
    re.DOTALL,
)


def _decode_euc_jp(body: bytes) -> str:
    """EUC-JP as the standard decodes it. Its JIS X 0208 table is Microsoft's (NEC and IBM
    rows, U+FF5E for 0xA1C1), which Python's euc_jp lacks (457 codes undefined, 6 different) and
    cp932 has: each two-byte code is decoded as its Shift_JIS twin."""
    parts = []
    for run in _EUC_JP_RUNS.finditer(body):
        ascii_run, kana, jis0212, jis0208, _ = run.groups()
        if ascii_run is not None:
            parts.append(ascii_run.decode("ascii"))
        elif kana is not None:
            parts.append(kana.decode("euc_jp"))
        elif jis0212 is not None:  # the one difference: 0x8FA2B7 is U+FF5E, not ~
            parts.append(jis0212.decode("euc_jp", errors="replace").replace("~", "\uff5e"))
        elif jis0208 is not None:
            parts.append(_sjis_of(jis0208).decode("cp932", errors="replace"))
        else:
            parts.append("\ufffd")
    return "".join(parts)


def _sjis_of(pairs: bytes) -> bytes:
    """JIS X 0208 codes in EUC-JP form (row and cell + 0xA0) in Shift_JIS form."""
    out = bytearray()
    for index in range(0, len(pairs), 2):
        pointer = (pairs[index] - 0xA1) * 94 + pairs[index + 1] - 0xA1
        lead, trail = divmod(pointer, 188)
        out.append(lead + (0x81 if lead < 0x1F else 0xC1))
        out.append(trail + (0x40 if trail < 0x3F else 0x41))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Encoding:
    """A WHATWG encoding name (``windows-1252``, ``shift_jis``) and where it came from:
    ``bom``, ``header``, ``meta`` (prescan), ``late-meta`` (a ``<meta>`` after the prescan),
    ``detected`` or ``default``."""

    name: str
    source: str

    @property
    def codec(self) -> str:
        """The Python codec nearest to this encoding (to encode text, e.g. a URL's query)."""
        return _ENCODINGS[self.name][0]


def encoding_for(label: str) -> str | None:
    """The WHATWG encoding a label names ("get an encoding"), or None if it names none."""
    label = label.strip(_ASCII_WHITESPACE)
    return LABELS.get(label.lower()) if label.isascii() else None  # ASCII case only


def decode_as(body: bytes, name: str) -> str:
    """``body`` decoded by the standard's decoder of encoding ``name`` (no BOM handling);
    a bad sequence becomes U+FFFD."""
    if name == "replacement":
        return "\ufffd" if body else ""
    table = _TABLES.get(name)
    if table is not None:
        return codecs.charmap_decode(body, "replace", table)[0]
    if name == "euc-jp":
        return _decode_euc_jp(body)
    text = body.decode(_ENCODINGS[name][0], errors="replace")
    return text.translate(_GB18030_FIXES) if name in ("gbk", "gb18030") else text


def header_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a ``Content-Type`` value, if any."""
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"' ")
    return None


_SPACE_BYTES = b"\t\n\f\r "
_META_CHARSET = re.compile(r"charset", re.IGNORECASE)


_END = ("", "", -1)  # the bytes ended inside a tag: the scan stops there


def _get_attribute(data: bytes, pos: int) -> tuple[str, str, int] | None:
    """The attribute at ``pos`` (name, value: lower-cased, as Latin-1) and the position after
    it, by the prescan's "get an attribute"; None at ``>``, ``_END`` at the end of the bytes."""
    end = len(data)
    while pos < end and data[pos] in b"\t\n\f\r /":
        pos += 1
    if pos >= end:
        return _END
    if data[pos] == 0x3E:  # >
        return None
    name = bytearray()
    while True:
        if pos >= end:
            return _END
        byte = data[pos]
        if byte == 0x3D and name:  # =
            pos += 1
            break
        if byte in _SPACE_BYTES:
            while pos < end and data[pos] in _SPACE_BYTES:
                pos += 1
            if pos >= end:
                return _END
            if data[pos] != 0x3D:
                return name.decode("latin-1").lower(), "", pos
            pos += 1
            break
        if byte in b"/>":
            return name.decode("latin-1").lower(), "", pos
        name.append(byte)
        pos += 1
    while pos < end and data[pos] in _SPACE_BYTES:
        pos += 1
    if pos >= end:
        return _END
    value = bytearray()
    quote = data[pos]
    if quote in b"\"'":
        close = data.find(bytes([quote]), pos + 1)
        if close < 0:
            return _END
        value += data[pos + 1 : close]
        return name.decode("latin-1").lower(), value.decode("latin-1").lower(), close + 1
    if quote == 0x3E:
        return name.decode("latin-1").lower(), "", pos
    while pos < end and data[pos] not in b"\t\n\f\r >":
        value.append(data[pos])
        pos += 1
    if pos >= end:
        return _END
    return name.decode("latin-1").lower(), value.decode("latin-1").lower(), pos


def charset_in_content(content: str) -> str | None:
    """The encoding named by a ``<meta content>`` value (HTML's "extracting a character
    encoding from a meta element"), or None."""
    pos = 0
    while (found := _META_CHARSET.search(content, pos)) is not None:
        pos = found.end()
        while pos < len(content) and content[pos] in _ASCII_WHITESPACE:
            pos += 1
        if pos >= len(content) or content[pos] != "=":
            continue
        pos += 1
        while pos < len(content) and content[pos] in _ASCII_WHITESPACE:
            pos += 1
        if pos >= len(content):
            return None
        if content[pos] in "\"'":
            close = content.find(content[pos], pos + 1)
            return encoding_for(content[pos + 1 : close]) if close >= 0 else None
        label = re.match(r"[^\t\n\f\r ;]*", content[pos:])
        return encoding_for(label[0]) if label else None
    return None


def _meta_encoding(data: bytes, pos: int, *, prescan: bool) -> tuple[str | None, int]:
    """The encoding a ``<meta`` whose attributes start at ``pos`` declares, and the position
    after it. ``prescan``: the prescan's rule (the first of ``charset`` or a pragma decides);
    else the tree builder's (a working ``charset`` wins, else the pragma)."""
    seen: set[str] = set()
    charset: str | None = None
    charset_attr: str | None = None
    decided = False  # the prescan's charset is set (possibly to failure)
    need_pragma: bool | None = None
    got_pragma = False
    content: str | None = None
    while (attribute := _get_attribute(data, pos)) is not None:
        name, value, pos = attribute
        if pos < 0:
            return None, len(data)
        if name in seen:
            continue
        seen.add(name)
        if name == "http-equiv":
            got_pragma = got_pragma or value == "content-type"
        elif name == "content":
            content = value
            if not decided and (found := charset_in_content(value)) is not None:
                charset, decided, need_pragma = found, True, True
        elif name == "charset":
            charset_attr = encoding_for(value)
            charset, decided, need_pragma = charset_attr, True, False
    if prescan:
        if need_pragma is None or (need_pragma and not got_pragma):
            return None, pos
        return charset, pos
    if charset_attr is not None:
        return charset_attr, pos
    if got_pragma and content is not None:
        return charset_in_content(content), pos
    return None, pos


def _as_declared(name: str | None) -> str | None:
    """A ``<meta>`` cannot declare UTF-16 (it was read as ASCII) nor x-user-defined."""
    if name in ("utf-16be", "utf-16le"):
        return "utf-8"
    return "windows-1252" if name == "x-user-defined" else name


_TAG_START = re.compile(rb"<(?:!--|meta[\t\n\f\r /]|/?[A-Za-z]|[!/?])", re.IGNORECASE)
_RAW_TEXT = re.compile(rb"<(script|style|textarea|title|xmp|noembed|noframes)[\t\n\f\r />]", re.I)


def _scan(data: bytes, *, tree: bool) -> str | None:
    """The first ``<meta>`` encoding in ``data``, tags read by the prescan's tokenizer (so a
    ``<meta`` in a comment or in another tag's attribute does not count). ``tree``: as the
    tree builder meets it, where script, style and the like hold text, not tags."""
    pos = 0
    while (tag := _TAG_START.search(data, pos)) is not None:
        opener = tag[0].lower()
        if opener == b"<!--":
            close = data.find(b"-->", tag.start() + 2)
            if close < 0:
                return None
            pos = close + 3
        elif opener.startswith(b"<meta"):
            name, pos = _meta_encoding(data, tag.end(), prescan=not tree)
            if name is not None:
                return _as_declared(name)
        elif opener[1:2].isalpha() or (opener[1:2] == b"/" and opener[2:3].isalpha()):
            raw = _RAW_TEXT.match(data, tag.start()) if tree else None
            pos = tag.end()
            while pos < len(data) and data[pos] not in b"\t\n\f\r >":
                pos += 1
            while (attribute := _get_attribute(data, pos)) is not None:
                pos = attribute[2]
                if pos < 0:
                    return None
            pos = data.find(b">", pos)
            if pos < 0:
                return None
            if raw is not None:
                end_tag = re.compile(rb"</" + raw[1] + rb"[\t\n\f\r />]", re.I)
                closing = end_tag.search(data, pos)
                if closing is None:
                    return None
                pos = closing.start()
            pos += 1
        else:  # <! </ <? : a bogus comment up to the next >
            close = data.find(b">", tag.end())
            if close < 0:
                return None
            pos = close + 1
    return None


def prescan(head: bytes) -> str | None:
    """The encoding a ``<meta>`` in the first 1024 bytes declares (HTML's "prescan a byte
    stream to determine its encoding"), or None."""
    return _scan(head[:PRESCAN_BYTES], tree=False)


_LATE_META = re.compile(rb"<meta[\t\n\f\r /][^>]*charset", re.IGNORECASE)


def late_meta(body: bytes) -> str | None:
    """The encoding of the first ``<meta>`` in the document that declares one (the parser
    changes to it when the prescan found none), or None.

    Only a page with a ``<meta ... charset`` somewhere is tokenized (~0.3 s a MB), up to the
    end of the last such tag."""
    candidates = list(_LATE_META.finditer(body))
    if not candidates:
        return None
    end = body.find(b">", candidates[-1].end())
    return _scan(body if end < 0 else body[: end + 1], tree=True)


def detect(body: bytes) -> str:
    """Firefox's guess for undeclared bytes (chardetng on the first 64 KiB; decision 0041)."""
    return encoding_for(_chardetng(body[:DETECT_BYTES])) or "windows-1252"


def sniff(body: bytes, content_type: str | None, *, html: bool = True) -> Encoding:
    """The encoding to decode ``body`` with (see the module docstring for the order)."""
    for bom, bom_name in _BOMS:
        if body.startswith(bom):
            return Encoding(bom_name, "bom")
    declared = header_charset(content_type)
    name = encoding_for(declared) if declared else None
    if name is not None:
        return Encoding(name, "header")
    if html:
        name = prescan(body)
        if name is not None:
            return Encoding(name, "meta")
        name = late_meta(body)
        if name is not None:
            return Encoding(name, "late-meta")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return Encoding(detect(body), "detected")
    return Encoding("utf-8", "default")


def decode(body: bytes, content_type: str | None, *, html: bool = True) -> str:
    """``body`` as text in its sniffed encoding; a BOM is dropped, bad bytes replaced."""
    return _decode(body, sniff(body, content_type, html=html))


def _decode(body: bytes, encoding: Encoding) -> str:
    if encoding.source == "bom":
        body = body[3:] if encoding.name == "utf-8" else body[2:]
    return decode_as(body, encoding.name)


def text_of(result: FetchResult) -> str:
    """A fetched body as text: ``decode`` with the response's ``Content-Type``."""
    return decode(result.body, result.headers.get("content-type"), html=result.is_html)


def html_input(result: FetchResult, encoding: Encoding | None = None) -> str | bytes:
    """What to hand lexbor for a fetched body: the body itself when it is UTF-8 without a BOM,
    else the text ``text_of`` gives. lexbor reads bytes as UTF-8 and replaces a bad sequence
    as ``decode`` does; a decode, and selectolax's encode of the text back to UTF-8, cost
    ~40 µs on a 28 KB page (decision 0028). ``encoding``: the body's, when already sniffed."""
    if encoding is None:
        encoding = sniff(result.body, result.headers.get("content-type"), html=result.is_html)
    if encoding.name == "utf-8" and encoding.source != "bom":
        return result.body
    return _decode(result.body, encoding)
