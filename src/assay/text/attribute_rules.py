"""An indexed matcher for spaCy's attribute ruler: the same matches, found by lookup.

The attribute ruler of ``en_core_web_sm`` (the tag map and its exceptions: 179 rules)
finds its matches with spaCy's general ``Matcher``, which tries every rule at every
token. On retrieved passages that was 41 % of the parse (4.7 s of 11.9 s for 600
passages of 150 words on 2 cores), more than the parser. Its rules are plain: one or a
few tokens, each a conjunction of equalities, ``IN``, ``NOT_IN`` and ``REGEX`` tests on
the token's tag, lower-case form, dependency label or space flag. `IndexedRules` files each token
pattern under one value it requires (a tag, a form: ``{"TAG": "NN"}`` under
``(TAG, "NN")``) and tests at each token only the rules filed under that token's own
values, plus those that require none.

`index_attribute_ruler` gives a loaded pipeline's ruler this matcher when every rule is
in that plain form, and leaves the ruler as it is otherwise (a rule with an operator,
a regular expression or another attribute). The matches, and so every annotation, are
those of spaCy's matcher: ``tests/test_attribute_rules.py`` compares the two on the
dev texts, match for match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["IndexedRules", "index_attribute_ruler"]

#: the token attributes a plain rule may test, by the name a ``Matcher`` pattern uses
_ATTRIBUTES = ("TAG", "LOWER", "DEP", "IS_SPACE")

#: one token's test: (column in the token rows, kind, value(s)); kind is ``==``, ``in``,
#: ``not in`` (the values string hashes, 0 or 1 for IS_SPACE) or ``re`` (a compiled
#: pattern searched in the attribute's text, as the ``Matcher``'s ``REGEX`` does)
_Test = tuple[int, str, Any]


#: a rule's token pattern: (rule index, match id, the tests of each of its tokens)
_Pattern = tuple[int, int, Sequence[Sequence[_Test]]]

#: distinct token rows whose matches are remembered (about 0.5 KB each; 1,500 passages of
#: 150 words held 15,850, most of them seen once); the memo starts over when full
_MEMO_LIMIT = 10_000


class IndexedRules:
    """The rules of an attribute ruler, indexed by the token values they require.

    Built from the ruler's ``patterns`` (`from_ruler`: None when a rule is not plain, see
    the module docstring). `match` returns what ``AttributeRuler.match`` returns: the
    ``(rule index, match id, start, end)`` of every match, sorted. A one-token pattern's
    matches depend on the token's attribute values alone, so they are remembered by
    those values (most tokens of a text repeat a (tag, form, label) seen before).
    """

    def __init__(
        self,
        anchors: dict[tuple[int, Any], list[_Pattern]],
        unanchored: list[_Pattern],
        strings: Any,
    ) -> None:
        self._anchors = anchors
        self._unanchored = unanchored
        self._strings = strings
        #: by token row: the (rule index, match id) of the one-token patterns it matches,
        #: and the longer patterns that may start at it
        self._known: dict[tuple[int, ...], tuple[list[tuple[int, int]], list[_Pattern]]] = {}

    @classmethod
    def from_ruler(cls, ruler: Any) -> IndexedRules | None:
        """The indexed rules of spaCy ``AttributeRuler`` ``ruler``; None when one of its
        rules is not plain."""
        strings = ruler.vocab.strings
        anchors: dict[tuple[int, Any], list[_Pattern]] = {}
        unanchored: list[_Pattern] = []
        for index, rule in enumerate(ruler.patterns):
            match_id = strings.add(str(index))
            for pattern in rule["patterns"]:
                tokens = [_token_tests(spec, strings) for spec in pattern]
                if not tokens or any(t is None for t in tokens):
                    return None
                entry = (index, match_id, tokens)
                keys = _anchor(tokens[0])
                if keys is None:
                    unanchored.append(entry)
                for key in keys or ():
                    anchors.setdefault(key, []).append(entry)
        return cls(anchors, unanchored, strings)

    def match(self, doc: Any) -> list[tuple[int, int, int, int]]:
        """The matches of the rules in ``doc``, as ``AttributeRuler.match`` sorts them."""
        if len(doc) == 0:
            return []
        rows = [tuple(r) for r in doc.to_array(list(_ATTRIBUTES)).tolist()]
        found: list[tuple[int, int, int, int]] = []
        for start, row in enumerate(rows):
            known = self._known.get(row)
            single, longer = known if known is not None else self._learn(row)
            found.extend((index, match_id, start, start + 1) for index, match_id in single)
            for index, match_id, tokens in longer:
                end = start + len(tokens)
                if end <= len(rows) and all(
                    _passes(tests, rows[start + k], self._strings)
                    for k, tests in enumerate(tokens[1:], 1)  # the first passed in _learn
                ):
                    found.append((index, match_id, start, end))
        # like the Matcher, a rule matches a span once, whichever of its patterns matched
        return sorted(set(found))

    def _learn(self, row: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[_Pattern]]:
        """The one-token matches of a token with attribute values ``row`` and the longer
        patterns whose first token it matches, remembered for the next token with the
        same values."""
        candidates = [*self._unanchored]
        for column, value in enumerate(row):
            candidates.extend(self._anchors.get((column, value), ()))
        single = [
            (index, match_id)
            for index, match_id, tokens in candidates
            if len(tokens) == 1 and _passes(tokens[0], row, self._strings)
        ]
        longer = [c for c in candidates if len(c[2]) > 1 and _passes(c[2][0], row, self._strings)]
        if len(self._known) >= _MEMO_LIMIT:
            self._known.clear()
        self._known[row] = (single, longer)
        return single, longer


def _token_tests(spec: Any, strings: Any) -> list[_Test] | None:
    """The tests of one token spec of a ``Matcher`` pattern; None when it is not plain."""
    if not isinstance(spec, dict) or not spec:
        return None
    tests: list[_Test] = []
    for name, value in spec.items():
        if name not in _ATTRIBUTES:
            return None
        column = _ATTRIBUTES.index(name)
        encode = (lambda v: int(bool(v))) if name == "IS_SPACE" else strings.add
        if isinstance(value, dict):
            if len(value) != 1 or next(iter(value)) not in ("IN", "NOT_IN", "REGEX"):
                return None
            kind, values = next(iter(value.items()))
            if kind == "REGEX":
                if name == "IS_SPACE" or not isinstance(values, str):
                    return None
                tests.append((column, "re", re.compile(values)))
                continue
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                return None
            codes = frozenset(encode(v) for v in values)
            tests.append((column, "in" if kind == "IN" else "not in", codes))
        elif name == "IS_SPACE" and isinstance(value, bool):
            tests.append((column, "==", int(value)))
        elif name != "IS_SPACE" and isinstance(value, str):
            tests.append((column, "==", encode(value)))
        else:
            return None
    return tests


def _anchor(tests: Sequence[_Test]) -> list[tuple[int, Any]] | None:
    """The (column, value) keys to file a token pattern under: the values of its first
    equality or ``IN`` test (a token it matches holds one of them, and only one: so a
    pattern is never tried twice at a token); None when it has neither."""
    for column, kind, value in tests:
        if kind == "==":
            return [(column, value)]
        if kind == "in":
            return [(column, v) for v in sorted(value)]
    return None


def _passes(tests: Sequence[_Test], row: Sequence[int], strings: Any) -> bool:
    """True when a token (its ``row`` of attribute values) passes every test."""
    for column, kind, value in tests:
        held = row[column]
        if kind == "==":
            if held != value:
                return False
        elif kind == "in":
            if held not in value:
                return False
        elif kind == "not in":
            if held in value:
                return False
        elif not value.search(strings[held]):
            return False
    return True


def index_attribute_ruler(nlp: Any) -> bool:
    """Give the ``attribute_ruler`` of pipeline ``nlp`` the indexed matcher (see the
    module docstring); True when it was given, False when the pipeline has no such
    component or one of its rules is not plain (the ruler then keeps spaCy's matcher)."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    rules = IndexedRules.from_ruler(ruler)
    if rules is None:
        return False
    ruler.match = rules.match  # AttributeRuler.__call__ calls self.match(doc)
    return True
