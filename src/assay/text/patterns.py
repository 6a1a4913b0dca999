"""Versioned pattern lists (package data) compiled into word-aware, case-insensitive regexes.

The safety and security metrics keep their phrase lists as data: ``assay/data/*.yaml``,
each with a ``version:`` key. Users extend them with ``extra_patterns_file`` in the
configuration (a YAML file whose ``safety:`` / ``security:`` sections mirror the shipped
files; its lists are appended to the shipped ones).

Entries. A list item is a plain string (a phrase, weight 1.0) or a mapping with exactly one
of ``phrase`` (words matched as whole words, any run of whitespace between them) or
``regex`` (a Python regular expression), plus optional keys: ``weight`` (0..1), ``label``
(a component or category), ``kind`` and ``validate`` (PII detectors), ``case_sensitive``,
``specified`` (true when the chatbot metrics hub lists it; ``seed``, its name in earlier
versions, is read as ``specified``), ``note`` and ``example`` (a text the entry must match;
the tests check every example).

Normalisation, applied to texts and to patterns alike (`normalise`): Unicode NFKC (folds
full-width letters, mathematical alphanumerics and Arabic presentation forms), Arabic
diacritics (tashkeel) and tatweel removed, alef variants (أ إ آ ٱ) to ا, ى to ي, ة to ه,
curly apostrophes to '. Against evasion: invisible format characters (zero-width space and
joiners, word joiner, soft hyphen, BOM, bidi controls: Unicode category Cf) are removed, so
"ig\\u200bnore previous" is "ignore previous"; Unicode tag characters (U+E0020-E007E, used to
smuggle hidden ASCII) become the ASCII they encode; combining marks of the Latin/Greek/
Cyrillic diacritic blocks that did not compose under NFKC ("zalgo" text) are removed; and
in a word that mixes ASCII letters with Cyrillic/Greek look-alikes ("іgnоrе" with Cyrillic
і and о), or consists of look-alikes only, those are mapped to the Latin letters they
imitate. A word in another script (Russian "сосна") is left alone. Matching is
case-insensitive unless an entry says ``case_sensitive: true``. Offsets of `Hit` refer to
the normalised text.

Boundary rule. Python's ``\\b`` is defined on ``\\w``; it misplaces boundaries around
Arabic combining marks and knows nothing of Arabic proclitics, which are written joined to
the word (و "and", ف "so", ب "with", ل "for", ك "like", ال "the": والقتل = "and the
killing"). So every pattern is wrapped as::

    (?:(?<!W)|(?!W))  PATTERN  (?:(?!W)|(?<!W))        W = a letter or digit

i.e. a match may not start inside a word when it starts with a letter, nor end inside one
when it ends with a letter (patterns that start or end with punctuation, such as
``system:`` or ``<|``, are bounded only on their word side). For a phrase whose first word
is Arabic and has at least three letters, optional proclitics are allowed before it
(و/ف, then ب/ك/ل or ال/لل); a leading ال of the pattern also matches لل and بال/وال.
The three-letter minimum keeps short words from matching inside others (بسم "in the name
of" is not ب + سم "poison"). Suffixes are not stripped: list inflected forms explicitly.
"""

from __future__ import annotations

import hashlib
import re
import re._constants as _sre_c
import re._parser as _sre_parse
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from assay.text.arabic import fold_letters, strip_marks

__all__ = [
    "VALIDATORS",
    "Hit",
    "PatternBundle",
    "PatternError",
    "PatternSet",
    "load_patterns",
    "normalise",
    "sentence_spans",
]

_QUOTES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "“": '"', "”": '"'})
_ARABIC_LETTER = re.compile("[\u0620-\u064a\u066e-\u06d3]")
_W = r"[^\W_]"
_LEFT = rf"(?:(?<!{_W})|(?!{_W}))"
_RIGHT = rf"(?:(?!{_W})|(?<!{_W}))"
# Arabic proclitics: (و|ف)? then (ب|ك|ل | ال | بال/كال | لل)?
_AR_PREFIX = "(?:[وف]?(?:[بك]?ال|لل|[بكل])?)"
_AR_PREFIX_FOR_AL = "(?:[وف]?[بك]?ال|[وف]?لل)"
_SENTENCE_END = re.compile(r"(?<=[.!?؟。])\s+|\n+")

_ENTRY_KEYS = frozenset(
    {
        "phrase",
        "regex",
        "weight",
        "label",
        "kind",
        "validate",
        "case_sensitive",
        "specified",
        "note",
        "example",
    }
)
#: entry keys renamed since the docs first listed them (old -> new): extension files
#: written against the earlier docs keep loading
_RENAMED_KEYS = {"seed": "specified"}


class PatternError(ValueError):
    """A pattern file or entry is unusable; the message names the file, list and entry."""


# Unicode category Cf (format characters: invisible), as of Unicode 14 (Python 3.11); the
# tag block U+E0020-E007E is decoded instead (see `_TAGS`)
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e007f]"
)
_TAGS = {cp: cp - 0xE0000 for cp in range(0xE0020, 0xE007F)}
# combining marks of the Latin/Greek/Cyrillic diacritic blocks (left after NFKC only when
# they do not compose with their base: "zalgo" text)
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
# Cyrillic and Greek letters (and dotless i, script g) that look like Latin ones
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("аеорсухіјѕԁһӏԛԝѵ", "aeopcyxijsdhlqwv", strict=True)),
        **dict(zip("АВЕКМНОРСТХІЈЅ", "ABEKMHOPCTXIJS", strict=True)),
        **dict(zip("οαικνρυχε", "oaikvpuxe", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
        "ı": "i",
        "ɡ": "g",
    }
)
_CONFUSABLE_CHAR = re.compile("[" + "".join(chr(c) for c in _CONFUSABLES) + "]")
_LETTERS = re.compile(r"[^\W\d_]+")
_LATIN_OR_CONFUSABLE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + "".join(map(chr, _CONFUSABLES))
)
#: texts longer than this are not cached (a batch of 1 MB responses must not pin memory)
CACHE_MAX_CHARS = 20_000


def _unconfuse_word(m: re.Match[str]) -> str:
    word = m.group(0)
    if _CONFUSABLE_CHAR.search(word) and _LATIN_OR_CONFUSABLE.issuperset(word):
        return word.translate(_CONFUSABLES)
    return word


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = strip_marks(text)
    text = _INVISIBLE.sub("", text).translate(_TAGS)
    text = _COMBINING.sub("", text)
    if _CONFUSABLE_CHAR.search(text):
        text = _LETTERS.sub(_unconfuse_word, text)
    return fold_letters(text).translate(_QUOTES)


_normalise_cached = lru_cache(maxsize=16384)(_normalise)


def normalise(text: str) -> str:
    """The matching form of ``text`` (see the module docstring); cached for short texts."""
    if len(text) > CACHE_MAX_CHARS:
        return _normalise(text)
    return _normalise_cached(text)


_lower_cached = lru_cache(maxsize=16384)(str.lower)


def _lower(text: str) -> str:
    return text.lower() if len(text) > CACHE_MAX_CHARS else _lower_cached(text)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence of ``text`` (split as `tokenize.sentences`)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if text[start : m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


# ---- validators (PII) ------------------------------------------------------------------
def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


_CARD_SEPARATORS = re.compile(r"[ -]+")


def luhn_ok(value: str) -> bool:
    """A payment card number: 13-19 digits passing the Luhn checksum, written whole or in
    groups of at least 3 digits (4-4-4-4, Amex 4-6-5, 4-4-4-4-3), not one digit repeated.

    The two extra rules drop Luhn-valid things that are no card: spaced single digits
    ("0 0 0 0 0 0 0 0 0 0 0 0 0", a row of scores) and the placeholder 0000 0000 0000 0000.
    """
    digits = _digits(value)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    if any(len(group) < 3 for group in _CARD_SEPARATORS.split(value.strip())):
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def ipv4_ok(value: str) -> bool:
    """Four dot-separated octets, each 0..255."""
    parts = value.split(".")
    return len(parts) == 4 and all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)


def ssn_ok(value: str) -> bool:
    """US SSN issuance rules: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    area, group, serial = value[:3], value[4:6], value[7:11]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def phone_ok(value: str) -> bool:
    """7 to 15 digits (ITU E.164 allows at most 15)."""
    return 7 <= len(_digits(value)) <= 15


_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\[[^\]]*\]|\{[^}]*\}|\$\{?\w+\}?|your[\w-]*|x+|\*+|\.+|redacted|"
    r"hidden|none|null|changeme|example|placeholder|\w*_here)$",
    re.IGNORECASE,
)


def secret_ok(value: str) -> bool:
    """A credential value, not a placeholder (``<your-key>``, ``YOUR_API_KEY``, ``****``)."""
    v = value.strip().strip("\"'`,.;")
    return len(v) >= 4 and len(set(v)) > 1 and not _PLACEHOLDER.match(v)


VALIDATORS: dict[str, Callable[[str], bool]] = {
    "luhn": luhn_ok,
    "ipv4": ipv4_ok,
    "ssn": ssn_ok,
    "phone": phone_ok,
    "secret": secret_ok,
}


# ---- compiled entries -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hit:
    """One match: the entry as written, its label/weight/kind, and the matched text."""

    pattern: str
    text: str
    start: int
    end: int
    weight: float = 1.0
    label: str | None = None
    kind: str | None = None
    value: str | None = None  # the ``value`` group of a PII/secret regex, when it has one

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pattern": self.pattern, "match": self.text}
        if self.label:
            out["label"] = self.label
        if self.weight != 1.0:
            out["weight"] = self.weight
        return out


@dataclass(frozen=True)
class Entry:
    pattern: str
    is_regex: bool
    weight: float
    label: str | None
    kind: str | None
    validate: str | None
    case_sensitive: bool
    specified: bool  # the chatbot metrics hub lists it
    examples: tuple[str, ...]
    regex: re.Pattern[str]
    source: str  # regex source, boundaries included
    literals: tuple[str, ...] | None  # one of these occurs (lower-cased) in every match


def _phrase_regex(phrase: str) -> str:
    words = normalise(phrase).split()
    if not words:
        raise ValueError("empty phrase")
    first = words[0]
    prefix = ""
    if _ARABIC_LETTER.match(first):
        letters = sum(1 for ch in first if _ARABIC_LETTER.match(ch))
        if first.startswith("ال") and letters >= 5:
            prefix, words[0] = _AR_PREFIX_FOR_AL, first[2:]
        elif letters >= 3:
            prefix = _AR_PREFIX
    body = r"\s+".join(re.escape(w) for w in words)
    if prefix:
        return f"(?<!{_W}){prefix}{body}"
    return body


def _compile_entry(raw: Any, where: str) -> Entry:
    if isinstance(raw, str):
        raw = {"phrase": raw}
    if not isinstance(raw, Mapping):
        raise PatternError(f"{where}: an entry must be a string or a mapping, got {raw!r}")
    for old, new in _RENAMED_KEYS.items():
        if old in raw:
            if new in raw:
                raise PatternError(
                    f"{where}: give {new!r} or its earlier name {old!r}, not both, in {dict(raw)!r}"
                )
            raw = {new if key == old else key: value for key, value in raw.items()}
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise PatternError(
            f"{where}: unknown key(s) {sorted(unknown)} in {dict(raw)!r}; "
            f"allowed: {sorted(_ENTRY_KEYS)}"
        )
    if ("phrase" in raw) == ("regex" in raw):
        raise PatternError(f"{where}: give exactly one of 'phrase' or 'regex' in {dict(raw)!r}")
    is_regex = "regex" in raw
    text = str(raw["regex"] if is_regex else raw["phrase"])
    weight = raw.get("weight", 1.0)
    if not isinstance(weight, int | float) or not 0 <= float(weight) <= 1:
        raise PatternError(
            f"{where}: weight of {text!r} must be a number in [0, 1], got {weight!r}"
        )
    validate = raw.get("validate")
    if validate is not None and validate not in VALIDATORS:
        raise PatternError(
            f"{where}: unknown validator {validate!r} for {text!r}; known: {sorted(VALIDATORS)}"
        )
    case_sensitive = bool(raw.get("case_sensitive", False))
    try:
        body = normalise(text) if is_regex else _phrase_regex(text)
        source = f"{_LEFT}(?:{body}){_RIGHT}"
        regex = re.compile(source, 0 if case_sensitive else re.IGNORECASE)
    except (re.error, ValueError) as exc:
        raise PatternError(f"{where}: cannot compile {text!r}: {exc}") from exc
    examples = raw.get("example", ())
    if isinstance(examples, str):
        examples = (examples,)
    return Entry(
        pattern=text,
        is_regex=is_regex,
        weight=float(weight),
        label=raw.get("label"),
        kind=raw.get("kind"),
        validate=validate,
        case_sensitive=case_sensitive,
        specified=bool(raw.get("specified", False)),
        examples=tuple(str(e) for e in examples),
        regex=regex,
        source=source,
        literals=_required_literals(source, regex.flags),
    )


def _literal_options(items: list[tuple[Any, Any]]) -> set[str] | None:
    """Strings of which at least one occurs in every match of the parsed sequence ``items``.

    The best (longest shortest-option) of the sequence's literal runs, groups, alternations
    and repeats with a minimum of at least one; None when nothing is certain.
    """
    candidates: list[set[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is _sre_c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            candidates.append({"".join(run)})
            run = []
        sub: set[str] | None = None
        if op is _sre_c.SUBPATTERN:
            sub = _literal_options(list(av[-1]))
        elif op is _sre_c.BRANCH:
            alternatives = [_literal_options(list(branch)) for branch in av[1]]
            if all(a is not None for a in alternatives):
                sub = set().union(*alternatives)  # type: ignore[arg-type]
        elif op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) and av[0] >= 1:
            sub = _literal_options(list(av[2]))
        if sub:
            candidates.append(sub)
    if run:
        candidates.append({"".join(run)})
    candidates = [c for c in candidates if min(len(x) for x in c) > 0]
    if not candidates:
        return None
    return max(candidates, key=lambda c: (min(len(x) for x in c), -len(c)))


def _required_literals(source: str, flags: int) -> tuple[str, ...] | None:
    """Lower-cased literals of which one must occur in any match of ``source``, or None."""
    try:
        options = _literal_options(list(_sre_parse.parse(source, flags)))
    except Exception:  # an internal parser change must not break matching
        return None
    return tuple(sorted({o.lower() for o in options})) if options else None


class PatternSet:
    """One compiled list. ``find`` returns every entry's matches (validated), with caching.

    Speed: each entry knows literals one of which must occur in any of its matches (read
    from the parsed regex: its longest certain run of literal characters); an entry whose
    literals are absent from the lower-cased text is skipped with a substring test, so a
    text that matches nothing costs a few microseconds, not a regex scan per entry.
    """

    def __init__(self, name: str, entries: list[Entry]) -> None:
        self.name = name
        self.entries = tuple(entries)
        # the literals of all entries, each tested once per text; and per entry whether
        # its regex has a ``value`` group
        self._literals = tuple(sorted({lit for e in entries for lit in e.literals or ()}))
        self._has_value = tuple("value" in e.regex.groupindex for e in entries)
        self._find = lru_cache(maxsize=8192)(self._find_uncached)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def find(self, text: str | None) -> list[Hit]:
        """All matches in ``normalise(text)``; overlapping hits of one entry are not repeated."""
        if not text or not self.entries:
            return []
        if len(text) > CACHE_MAX_CHARS:
            return list(self._find_uncached(text))
        return list(self._find(text))

    def search(self, text: str | None) -> bool:
        """True when any entry matches (validators applied)."""
        return bool(self.find(text))

    def max_weight(self, text: str | None) -> tuple[float, list[Hit]]:
        """Highest weight among the matches (0.0 when none) and the matches."""
        hits = self.find(text)
        return (max((h.weight for h in hits), default=0.0), hits)

    def _find_uncached(self, text: str) -> tuple[Hit, ...]:
        norm = normalise(text)
        low = _lower(norm)
        present = {lit for lit in self._literals if lit in low}
        hits: list[Hit] = []
        for e, has_value in zip(self.entries, self._has_value, strict=True):
            if e.literals is not None and present.isdisjoint(e.literals):
                continue
            for m in e.regex.finditer(norm):
                value = m.group("value") if has_value else None
                checked = value if has_value else m.group(0)
                if e.validate and not VALIDATORS[e.validate](checked):
                    continue
                hits.append(
                    Hit(e.pattern, m.group(0), m.start(), m.end(), e.weight, e.label, e.kind, value)
                )
                if not e.validate and not e.kind:
                    break  # evidence: one match per entry is enough, except for findings
        return tuple(hits)


# ---- files -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PatternBundle:
    """One pattern file (plus user extensions): its version and its lists by dotted path."""

    name: str
    version: str
    lists: dict[str, PatternSet]
    settings: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, path: str) -> PatternSet:
        try:
            return self.lists[path]
        except KeyError:
            raise KeyError(
                f"no pattern list {path!r} in {self.name}; lists: {', '.join(sorted(self.lists))}"
            ) from None

    def get(self, path: str) -> PatternSet | None:
        return self.lists.get(path)


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf; a list is a leaf."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping):
                yield from _walk(value, path)
            else:
                yield path, value
    else:
        yield prefix, node


def _read_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PatternError(f"{where}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PatternError(f"{where}: the top level must be a mapping")
    return data


@lru_cache(maxsize=32)
def _load(name: str, extra_file: str | None, extra_mtime: float | None) -> PatternBundle:
    del extra_mtime  # part of the cache key only: an edited file is reloaded
    shipped = resources.files("assay.data").joinpath(f"{name}_patterns.yaml")
    data = _read_yaml(shipped.read_text(encoding="utf-8"), f"{name}_patterns.yaml")
    version = str(data.pop("version", "0"))
    raw_lists: dict[str, list[Any]] = {}
    settings: dict[str, Any] = {}
    for path, value in _walk(data):
        if isinstance(value, list):
            raw_lists[path] = list(value)
        else:
            settings[path] = value
    if extra_file:
        where = str(extra_file)
        try:
            text = Path(extra_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise PatternError(f"extra_patterns_file {where}: cannot read it: {exc}") from exc
        extra = _read_yaml(text, where)
        unknown_sections = set(extra) - {"safety", "security", "version"}
        if unknown_sections:
            raise PatternError(
                f"{where}: unknown section(s) {sorted(unknown_sections)}; "
                "use 'safety:' and/or 'security:' mirroring the shipped pattern files"
            )
        section = extra.get(name) or {}
        added = 0
        for path, value in _walk(section):
            if path not in raw_lists:
                raise PatternError(
                    f"{where}: '{name}.{path}' is not a pattern list; "
                    f"lists of {name}: {', '.join(sorted(raw_lists))}"
                )
            if not isinstance(value, list):
                raise PatternError(f"{where}: '{name}.{path}' must be a list of entries")
            raw_lists[path].extend(value)
            added += len(value)
        if added:
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
            version = f"{version}+extra.{digest}"
    lists = {
        path: PatternSet(
            path,
            [_compile_entry(item, f"{name}.{path}[{i}]") for i, item in enumerate(items)],
        )
        for path, items in raw_lists.items()
    }
    return PatternBundle(name=name, version=version, lists=lists, settings=settings)


_lock = threading.Lock()


def load_patterns(name: str, extra_file: str | Path | None = None) -> PatternBundle:
    """The shipped ``<name>_patterns.yaml`` (``safety`` or ``security``) plus extensions.

    Cached per (file, modification time). Raises `PatternError` with the file, list and
    entry named when something is malformed.
    """
    mtime: float | None = None
    if extra_file:
        try:
            mtime = Path(extra_file).stat().st_mtime
        except OSError as exc:
            raise PatternError(f"extra_patterns_file {extra_file}: cannot read it: {exc}") from exc
    with _lock:
        return _load(name, str(extra_file) if extra_file else None, mtime)
