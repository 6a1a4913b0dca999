"""Loaders of the human-labelled development data that ``validity.py`` checks metrics on.

Each returns samples in Assay's shape plus the human labels, read once per data folder.
The files and their licences are described in the data folder's README.
"""

from __future__ import annotations

import csv
import functools
import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from assay.core.sample import Sample


@functools.cache
def stsb_pairs(data: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B dev: sentence1, sentence2 and the mean human similarity (0-5).

    TAB-separated, no header, unquoted text: read with QUOTE_NONE, keep the first 7 fields
    (genre, file, year, id, score, sentence1, sentence2).
    """
    left: list[str] = []
    right: list[str] = []
    gold: list[float] = []
    with (data / "stsb-dev.tsv").open(encoding="utf-8", newline="") as handle:
        for fields in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(fields) < 7:
                continue
            _genre, _file, _year, _id, score, s1, s2 = fields[:7]
            left.append(s1)
            right.append(s2)
            gold.append(float(score))
    return left, right, np.asarray(gold, dtype=np.float64)


@functools.cache
def begin_rows(data: Path, with_message: bool = False) -> tuple[list[Sample], np.ndarray]:
    """BEGIN (Wizard of Wikipedia dev): knowledge as the context, response as the answer,
    label 1 for "Fully attributable", 0 otherwise. ``with_message``: the user's message
    that the response answers becomes the query."""
    samples: list[Sample] = []
    labels: list[int] = []
    with (data / "begin-wow-dev.tsv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            query = row["message"] if with_message else None
            samples.append(
                Sample(query=query, response=row["response"], contexts=[row["knowledge"]])
            )
            labels.append(int(row["begin_label"] == "Fully attributable"))
    return samples, np.asarray(labels)


@functools.cache
def truthfulqa_items(data: Path) -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """TruthfulQA (first 400 questions): every correct and every incorrect answer as a
    sample against the best answer; labels 1/0 and the question index of each."""
    samples: list[Sample] = []
    labels: list[int] = []
    groups: list[int] = []
    with (data / "truthfulqa-dev.csv").open(encoding="utf-8", newline="") as handle:
        for index, row in enumerate(csv.DictReader(handle)):
            for column, label in (("Correct Answers", 1), ("Incorrect Answers", 0)):
                for answer in row[column].split("; "):
                    if answer.strip():
                        samples.append(
                            Sample(
                                query=row["Question"],
                                response=answer.strip(),
                                expected=row["Best Answer"],
                            )
                        )
                        labels.append(label)
                        groups.append(index)
    return samples, np.asarray(labels), np.asarray(groups)


@functools.cache
def qags_cnndm_sentences(data: Path) -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """QAGS CNN/DM: every summary sentence as the answer with its article as the context;
    label 1 when most of its 3 crowd answers say the article supports it, and the article
    index of each (sentences of one summary share an article)."""
    samples: list[Sample] = []
    labels: list[int] = []
    groups: list[int] = []
    with (data / "qags-cnndm-dev.jsonl").open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            item = json.loads(line)
            for sentence in item["summary_sentences"]:
                votes = [r["response"] == "yes" for r in sentence["responses"]]
                samples.append(Sample(response=sentence["sentence"], contexts=[item["article"]]))
                labels.append(int(2 * sum(votes) > len(votes)))
                groups.append(index)
    return samples, np.asarray(labels), np.asarray(groups)


#: the words a long document reaches (`long_documents`)
LONG_WORDS = 10_000


def long_documents(articles: Sequence[str], words: int = LONG_WORDS, seed: int = 0) -> list[str]:
    """One document per article, of at least ``words`` words: the other articles in one
    shuffled order (``seed``; the same for every document) until, with the article, they
    reach ``words``, and the article put in among them at a position drawn from ``seed``;
    blank lines between articles. QAGS CNN/DM's articles give about 31 to a document of
    10,000 words; each document is a distinct text, so each is read whole."""
    rng = random.Random(seed)
    order = list(range(len(articles)))
    rng.shuffle(order)
    sizes = [len(a.split()) for a in articles]
    documents = []
    for i, article in enumerate(articles):
        others, total = [], sizes[i]
        for k in order:
            if total >= words:
                break
            if k != i:
                others.append(articles[k])
                total += sizes[k]
        others.insert(rng.randrange(len(others) + 1), article)
        documents.append("\n\n".join(others))
    return documents


def qags_cnndm_long(data: Path) -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """`qags_cnndm_sentences` with each sentence's article read inside a document of
    `LONG_WORDS` words (`long_documents`): the same sentences, labels and groups."""
    samples, labels, groups = qags_cnndm_sentences(data)
    articles = {int(g): s.contexts[0] for s, g in zip(samples, groups, strict=True)}
    keys = sorted(articles)
    document = dict(zip(keys, long_documents([articles[k] for k in keys]), strict=True))
    long = [
        Sample(response=s.response, contexts=[document[int(g)]])
        for s, g in zip(samples, groups, strict=True)
    ]
    return long, labels, groups


@functools.cache
def davidson_tweets(data: Path, per_class: int, seed: int) -> tuple[list[Sample], np.ndarray]:
    """Davidson et al. tweets as responses with the annotators' majority class (0 hate
    speech, 1 offensive language, 2 neither): at most ``per_class`` of each class, drawn
    at random (``seed``), in file order."""
    texts: list[str] = []
    classes: list[int] = []
    with (data / "davidson-tweets.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            texts.append(row["tweet"])
            classes.append(int(row["class"]))
    labels = np.asarray(classes)
    rng = np.random.default_rng(seed)
    chosen = np.sort(
        np.concatenate(
            [rng.permutation(np.flatnonzero(labels == k))[:per_class] for k in np.unique(labels)]
        )
    )
    return [Sample(response=texts[i]) for i in chosen], labels[chosen]


#: the hand-written screens of supported and unsupported answers (their READMEs): answers
#: that explain (a cause, a purpose, ...), and answers that merge two facts of the passage
EXPLAINING_ANSWERS = Path(__file__).resolve().parent / "data" / "explaining_answers"
MERGED_ANSWERS = Path(__file__).resolve().parent / "data" / "merged_answers"


def hand_written_answers(folder: Path) -> tuple[list[Sample], np.ndarray, list[str]]:
    """The answers of a hand-written screen (``<folder>/<folder name>.jsonl``) as samples
    (the passage as the one context), label 1 where the answer is supported, and each
    answer's kind (explaining answers: cause, purpose, consequence, detail, hedge)."""
    samples: list[Sample] = []
    labels: list[int] = []
    kinds: list[str] = []
    with (folder / f"{folder.name}.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            samples.append(Sample(id=row["id"], response=row["answer"], contexts=[row["context"]]))
            labels.append(int(row["supported"]))
            kinds.append(row["kind"])
    return samples, np.asarray(labels), kinds
