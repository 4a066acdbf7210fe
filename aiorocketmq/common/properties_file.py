"""Java ``.properties`` text -> ``dict[str, str]``, the format of RocketMQ's config files.

Owns: ``parse_properties`` (``java.util.Properties.load`` rules: ``#``/``!``
comments, ``key=value``, ``key: value`` or ``key value``, backslash line
continuations, ``\\t \\n \\r \\f \\uXXXX`` escapes), ``parse_properties_bytes`` (a
file's bytes read as ``Properties.load(InputStream)`` does: ISO-8859-1, so any
byte loads and other characters come from ``\\uXXXX``), ``format_properties`` (the
``key=value`` lines RocketMQ prints for ``-p`` and GET_*_CONFIG) and
``format_properties_file`` (what ``Properties.store`` writes: escaped so that both
Java and ``parse_properties_bytes`` read back the same strings).

Must not: do I/O (callers read and write the file) or interpret values: types are
the config models' business.

One deliberate difference from Java: values are stripped of trailing whitespace.
Java keeps it, and RocketMQ's ``Integer.parseInt`` then fails on ``9876 `` with an
error hard to see; no RocketMQ setting means anything by trailing blanks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

__all__ = [
    "format_properties",
    "format_properties_file",
    "parse_properties",
    "parse_properties_bytes",
]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"
_BLANKS = " \t\f"


def _logical_lines(text: str) -> Iterator[str]:
    """Join continuation lines (an odd number of trailing backslashes)."""
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip(_BLANKS)
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield "".join(pending)
        pending = []
    if pending:
        yield "".join(pending)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ValueError(f"malformed \\uxxxx escape {text[i : i + 6]!r}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # \uD83D\uDE00 is one character in Java's UTF-16 strings: pair the halves.
        result = result.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return result


def _split_key(line: str) -> tuple[str, str]:
    """Find the end of the key: the first unescaped separator or blank."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in _SEPARATORS or ch in _BLANKS:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_BLANKS)
    if rest[:1] and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text; a later key wins over an earlier one.

    Raises:
        ValueError: a malformed ``\\uXXXX`` escape.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        result[_unescape(key)] = _unescape(value).rstrip()
    return result


def parse_properties_bytes(data: bytes) -> dict[str, str]:
    """Parse a ``.properties`` file's bytes as Java's ``Properties.load(InputStream)``.

    ISO-8859-1: every byte is one character, so a file Java loads loads here the
    same; UTF-8 text outside ASCII reads as Java reads it (one character per byte),
    and ``\\uXXXX`` escapes give any character.

    Raises:
        ValueError: a malformed ``\\uXXXX`` escape.
    """
    return parse_properties(data.decode("latin-1"))


def _escape(text: str, *, key: bool) -> str:
    """``Properties.saveConvert``: backslash escapes, ``\\uXXXX`` past printable ASCII."""
    out: list[str] = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch == " " and (key or i == 0):
            out.append("\\ ")
        elif ch in "=:#!" and (key or i == 0):
            out.append("\\" + ch)
        elif code < 0x20 or code > 0x7E:
            # Past the BMP: a surrogate pair, as Java's UTF-16 strings hold it.
            units = ch.encode("utf-16-be")
            for j in range(0, len(units), 2):
                out.append(f"\\u{int.from_bytes(units[j : j + 2], 'big'):04X}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties_file(items: Iterable[tuple[str, object]] | Mapping[str, object]) -> str:
    """``key=value`` lines escaped as ``Properties.store`` escapes them (pure ASCII text)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    lines = []
    for key, value in pairs:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        lines.append(f"{_escape(key, key=True)}={_escape(text, key=False)}\n")
    return "".join(lines)


def format_properties(items: Iterable[tuple[str, object]] | Mapping[str, object]) -> str:
    """``key=value`` lines (booleans as ``true``/``false``), each ending in a newline."""
    pairs = items.items() if isinstance(items, Mapping) else items
    lines = []
    for key, value in pairs:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text}\n")
    return "".join(lines)
