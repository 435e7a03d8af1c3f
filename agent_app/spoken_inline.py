"""Inline markdown and written forms turned into what a person would say: one line's text at a time.

Pure. `speak_inline` rewrites a piece of one line: emphasis markers dropped, code spans read as
their content, links and images read as their text, bare URLs as their host ("example dot com"),
e-mail addresses as "jane dot doe at example dot com", emoji removed, phone numbers digit by digit,
ISO dates as "June 1, 2024", and the units and money suffixes that the G2P (misaki) gets wrong
spelled out. What misaki already reads well ("$5.50", "50%", "£3", "10:30", "3,000", "1st") is left
alone; see `agent_app/README.md` for what was checked.

Streaming (`spoken.py`) cuts a line only at a gap where `safe_cut` holds, and every rule here
matches text that never contains such a gap: so rewriting the pieces one by one gives the same
text as rewriting the line whole.
"""

from __future__ import annotations

import re
from typing import Final

DIGIT_NAMES: Final = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

UNITS: Final = {
    "km": ("kilometer", "kilometers"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"),
    "ft": ("foot", "feet"),
    "ms": ("millisecond", "milliseconds"),
    "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"),
    "hrs": ("hour", "hours"),
    "kW": ("kilowatt", "kilowatts"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
}
"""Unit symbols after a number that misaki (with its espeak fallback, as the speech server runs it)
was seen to get wrong: it spells them letter by letter ("km" as "K M", "ms" as "M S") or reads
them as words ("min" as "min"). Those it reads well ("MHz", "GHz", "lbs", "%", "°") are left to it."""

SCALES: Final = {"k": "thousand", "K": "thousand", "M": "million", "B": "billion", "bn": "billion", "T": "trillion"}
"""Money suffixes: misaki reads "$5M" as "five M"."""

_EMOJI: Final = re.compile(
    "["
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags' letters, supplemental symbols
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats (☀ ✅ ✨ ❤)
    "\u2b00-\u2bff"  # arrows and stars used as emoji (⭐ ⬆)
    "\u2190-\u21ff"  # arrows (→ is read as nothing useful)
    "\u231a\u231b\u23e9-\u23fa"  # watch, hourglass, media buttons
    "\ufe0f\ufe0e\u200d\u20e3"  # presentation selectors, zero-width joiner, keycap
    "\U000e0020-\U000e007f"  # tag characters (subdivision flags)
    "]+"
)

# Each of these matches inside one token, or across tokens that `safe_cut` never separates.
_CODE_SPAN: Final = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BACKTICKS: Final = re.compile(r"`+")
_IMAGE: Final = re.compile(r"!\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_LINK: Final = re.compile(r"\[([^\]]+)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_AUTOLINK: Final = re.compile(r"<((?:https?://|mailto:)[^>\s]+)>")
_URL: Final = re.compile(r"\b(?:https?://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]'”’]")
_EMAIL: Final = re.compile(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
_HTML_TAG: Final = re.compile(r"</?(?:b|i|u|em|strong|br|s|del|code|sup|sub|span|p)\s*/?>", re.IGNORECASE)
_EMPHASIS_OPEN: Final = re.compile(r"(?<![\w*_~])(?:\*{1,3}|_{1,3}|~~)(?=[^\s*_~])")
_EMPHASIS_CLOSE: Final = re.compile(r"(?<=[^\s*_~])(?:\*{1,3}|_{1,3}|~~)(?![\w*_~])")
_PHONE: Final = re.compile(
    r"(?<![\w+$€£.,-])(?:(\+\d{1,3})[ .-]?)?(\(\d{3}\)|\d{3})[ .-]?(\d{3})[ .-](\d{4})(?![\w.,-]\d|\w)"
)
_ISO_DATE: Final = re.compile(r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-])")
_TEMPERATURE: Final = re.compile(r"(?<![\w.,-])([-−])?(\d+(?:[.,]\d+)?)\s?°\s?([CF])\b")
_MONEY_SCALE: Final = re.compile(r"([$€£¥]\d+(?:[.,]\d+)?)\s?(bn|[kKMBT])\b")
_UNIT_SYMBOLS: Final = "|".join(re.escape(unit) for unit in sorted(UNITS, key=len, reverse=True))
_UNIT: Final = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)*)\s?(" + _UNIT_SYMBOLS + r")(?![\w/])")
_ESCAPE: Final = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")
_PRIVATE: Final = 0xE000
_UNESCAPE: Final = re.compile("[\ue000-\ue07f]")
_PIPE: Final = re.compile(r"\s*\|\s*")


def speak_inline(text: str) -> str:
    """A piece of one line, rewritten for the ear (whitespace is tidied later, by the stream)."""
    # An escaped mark ("\\*") is a literal: hidden from the rules below as a private-use character.
    text = _ESCAPE.sub(lambda m: chr(_PRIVATE + ord(m.group(1))), text)
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), text)
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _AUTOLINK.sub(lambda m: m.group(1).removeprefix("mailto:"), text)
    text = _HTML_TAG.sub(lambda m: " " if "br" in m.group(0).lower() else "", text)
    text = _EMAIL.sub(lambda m: _spoken_email(m.group(0)), text)
    text = _URL.sub(lambda m: _spoken_url(m.group(0)), text)
    text = _EMOJI.sub(" ", text)
    text = _EMPHASIS_OPEN.sub("", text)
    text = _EMPHASIS_CLOSE.sub("", text)
    text = _PIPE.sub(", ", text)
    text = _PHONE.sub(_spoken_phone, text)
    text = _ISO_DATE.sub(_spoken_date, text)
    text = _TEMPERATURE.sub(_spoken_temperature, text)
    text = _MONEY_SCALE.sub(lambda m: f"{m.group(1)} {SCALES[m.group(2)]}", text)
    text = _UNIT.sub(_spoken_unit, text)
    return _UNESCAPE.sub(lambda m: chr(ord(m.group(0)) - _PRIVATE), text)


def safe_cut(before: str) -> bool:
    """Whether a line may be cut (and its two sides rewritten apart) at a gap after `before`.

    Not inside a code span or a link, and not after a token with a digit: a unit, the rest of a
    phone number or a money suffix may follow it ("3 km", "(555) 123-4567").
    """
    if _open_code_span(before):
        return False
    if before.rfind("[") > before.rfind("]"):
        return False
    if before.rfind("](") > before.rfind(")"):
        return False
    last = before.rsplit(maxsplit=1)[-1] if before.strip() else ""
    if last.startswith("<") and ">" not in last:
        return False  # "<br />"
    return not any(ch.isdigit() for ch in last)


def _open_code_span(text: str) -> bool:
    """Whether `text` ends inside a code span (a run of n backticks waits for a run of exactly n)."""
    opening = 0
    for run in _BACKTICKS.finditer(text):
        length = len(run.group(0))
        if not opening:
            opening = length
        elif length == opening:
            opening = 0
    return opening > 0


def _spoken_url(url: str) -> str:
    # A listener cannot use a path or a query string; the host says where the link goes, and
    # the text shown keeps the whole link.
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", url, flags=re.IGNORECASE)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0]
    return " dot ".join(part for part in host.split(".") if part)


def _spoken_email(address: str) -> str:
    user, _, host = address.partition("@")
    return f"{' dot '.join(user.split('.'))} at {' dot '.join(host.split('.'))}"


def _spoken_phone(match: re.Match[str]) -> str:
    country, area, exchange, line = match.groups()
    groups = [area.strip("()"), exchange, line]
    spoken = ", ".join(" ".join(DIGIT_NAMES[int(d)] for d in group) for group in groups)
    if country:
        spoken = f"plus {' '.join(DIGIT_NAMES[int(d)] for d in country[1:])}, {spoken}"
    return spoken


def _spoken_date(match: re.Match[str]) -> str:
    year, month, day = (int(part) for part in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{MONTHS[month - 1]} {day}, {year}"


def _spoken_temperature(match: re.Match[str]) -> str:
    # misaki reads "20°C" as "twenty degrees C" and loses "-5°C" altogether.
    minus, number, scale = match.groups()
    return f"{'minus ' if minus else ''}{number} degrees {'Celsius' if scale == 'C' else 'Fahrenheit'}"


def _spoken_unit(match: re.Match[str]) -> str:
    number, unit = match.groups()
    singular, plural = UNITS[unit]
    return f"{number} {singular if number == '1' else plural}"
