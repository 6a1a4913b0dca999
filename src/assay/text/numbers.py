"""Numbers in text: every number mention with its value, unit and currency.

`parse_numbers` reads digits (``1,200``, ``3.5``, ``12bn``), number words (``twelve``,
``two hundred``), scales (``million``, ``bn``), currencies (``$``, ``euros``) and percent
signs; ordinals and decades are recognised by `ORDINAL` and `DECADE`. The claim anchors
(`assay.text.anchors`) compare the values, so "12 million" and "12,000,000" agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["DECADE", "ORDINAL", "UNITS", "NumberMention", "parse_numbers"]

UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {
    "hundred": 1e2,
    "thousand": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "trillion": 1e12,
}
_CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
_CURRENCY_WORDS = {
    "dollar": "USD",
    "dollars": "USD",
    "usd": "USD",
    "euro": "EUR",
    "euros": "EUR",
    "eur": "EUR",
    "pound": "GBP",
    "pounds": "GBP",
    "gbp": "GBP",
    "sterling": "GBP",
    "yen": "JPY",
    "jpy": "JPY",
    "rupee": "INR",
    "rupees": "INR",
    "inr": "INR",
}


_NUMBER_TOKEN = re.compile(
    r"[$€£¥₹]|\d+(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:bn|mn|k|m|b)?\b|\d+(?:\.\d+)?"
    r"|%|[^\W\d_]+",
    re.UNICODE,
)
ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
DECADE = re.compile(r"^(\d+)'?s$")


@dataclass(frozen=True, slots=True)
class NumberMention:
    """One number stated in a text: its value, currency (ISO code) and percent flag."""

    value: float
    currency: str | None = None
    percent: bool = False

    def matches(self, other: NumberMention) -> bool:
        """Same value; and same currency when both name one."""
        if not math.isclose(self.value, other.value, rel_tol=1e-9, abs_tol=1e-12):
            return False
        return not (self.currency and other.currency and self.currency != other.currency)


def _digit_value(token: str) -> tuple[float, str | None]:
    """Value of a digit token and its attached suffix (k, m, b, bn, mn) if any."""
    match = re.fullmatch(r"([\d,]+(?:\.\d+)?)(bn|mn|k|m|b)?", token)
    if match is None:
        raise ValueError(token)
    return float(match.group(1).replace(",", "")), match.group(2)


def parse_numbers(text: str) -> list[NumberMention]:
    """Numbers stated in ``text``, written with digits or words, with scale and currency.

    "1,200" -> 1200; "$5 million" and "5 million dollars" -> 5e6 USD; "$5m"/"$5bn" ->
    5e6/5e9 USD (a bare "5m" is read as 5: it may be metres); "5k" -> 5000; "45%" and
    "45 percent" -> 45 (percent); "twenty-five" -> 25; "two hundred thousand" -> 200000;
    "a million" -> 1e6. Decimal points are dots; commas group thousands.
    """
    tokens = [t.lower() for t in _NUMBER_TOKEN.findall(text or "")]
    mentions: list[NumberMention] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        currency = _CURRENCY_SYMBOLS.get(tok)
        start = i + 1 if currency else i
        if start >= n:
            break
        value: float | None = None
        j = start
        first = tokens[start]
        if first[0].isdecimal():  # not isdigit: "²" and "①" are digits but not numbers
            value, suffix = _digit_value(first)
            j = start + 1
            if suffix in ("k",):
                value *= 1e3
            elif suffix in ("bn", "b") and (currency or suffix == "bn"):
                value *= 1e9
            elif suffix in ("m", "mn") and (currency or suffix == "mn"):
                value *= 1e6
            while j < n and tokens[j] in _SCALES:
                value *= _SCALES[tokens[j]]
                j += 1
        elif first in UNITS or (first == "a" and start + 1 < n and tokens[start + 1] in _SCALES):
            total, current = 0.0, 0.0
            while j < n and (tokens[j] in UNITS or tokens[j] in _SCALES or tokens[j] == "a"):
                word = tokens[j]
                if word == "a":
                    if j + 1 < n and tokens[j + 1] in _SCALES and j == start:
                        current = 1.0
                        j += 1
                        continue
                    break
                if word in UNITS:
                    current += UNITS[word]
                elif word == "hundred":
                    current = (current or 1.0) * 100
                else:
                    total += (current or 1.0) * _SCALES[word]
                    current = 0.0
                j += 1
            value = total + current
        if value is None:
            i += 1
            continue
        percent = False
        if j < n and tokens[j] in ("%", "percent"):
            percent, j = True, j + 1
        elif j + 1 < n and tokens[j] == "per" and tokens[j + 1] == "cent":
            percent, j = True, j + 2
        if currency is None and j < n and tokens[j] in _CURRENCY_WORDS:
            currency, j = _CURRENCY_WORDS[tokens[j]], j + 1
        mentions.append(NumberMention(value, currency, percent))
        i = j
    return mentions
