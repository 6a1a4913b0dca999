"""The scripted judge's answers (`scripted_reply`): it reads the data blocks of Assay's
rendered prompt (`parse_blocks`) and answers each task by word overlap, so a test knows
the verdict it gets without a model; `with_json_defects` gives a reply json-repair must mend.
Served by `judge_server.JudgeServer`."""

from __future__ import annotations

import html
import re
from typing import Any

from assay.text.tokenize import content_words, sentences

__all__ = ["parse_blocks", "scripted_reply", "with_json_defects"]

_BLOCK = re.compile(r"<([a-z_]+)>\n(.*?)\n</\1>", re.S)
_ITEM = re.compile(r'<([a-z_]+) index="\d+">\n(.*?)\n</\1>', re.S)


def parse_blocks(user: str) -> dict[str, Any]:
    """The data blocks of a rendered prompt, unescaped; a list block (``contexts``,
    ``turns``, ...) as the list of its items."""
    blocks: dict[str, Any] = {}
    for name, inner in _BLOCK.findall(user):
        items = _ITEM.findall(inner)
        if items and inner.startswith("<"):
            blocks[name] = [html.unescape(text) for _, text in items]
        else:
            blocks[name] = html.unescape(inner)
    return blocks


def _share(part: str, whole: str) -> float:
    """Share of ``part``'s distinct content words that occur in ``whole`` (1.0 if none)."""
    words = set(content_words(part))
    if not words:
        return 1.0
    return len(words & set(content_words(whole))) / len(words)


def _f1(a: str, b: str) -> float:
    p, r = _share(a, b), _share(b, a)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def scripted_reply(task: str, blocks: dict[str, Any]) -> dict[str, Any]:
    """A deterministic, plausible judge verdict computed by word overlap."""
    question = blocks.get("question") or blocks.get("query") or ""
    answer = blocks.get("answer") or blocks.get("response") or ""
    reference = blocks.get("reference_answer") or ""
    contexts: list[str] = blocks.get("contexts") or []
    joined = " ".join(contexts)
    if task == "relevance_rubric":
        return {"score": round(_share(question, answer), 2), "reason": "word overlap"}
    if task == "faithfulness_rubric":
        return {"score": round(_share(answer, joined), 2), "reason": "support"}
    if task == "hallucination_rubric":
        return {"score": round(1 - _share(answer, joined), 2), "reason": "support"}
    if task == "contextual_relevance_rubric":
        return {"score": round(_share(question, joined), 2), "reason": "coverage"}
    if task == "rag_verdicts":
        claims = []
        if answer:
            for sentence in sentences(answer):
                if content_words(sentence):
                    ok = _share(sentence, joined) >= 0.6
                    claims.append({"claim": sentence, "verdict": int(ok), "reason": "overlap"})
        verdicts = []
        if question:
            for i, context in enumerate(contexts, 1):
                share = _share(question + " " + reference, context)
                verdicts.append(
                    {
                        "context_index": i,
                        "is_relevant": share >= 0.3,
                        "relevance_score": round(100 * share),
                        "reasoning": "overlap",
                    }
                )
        statements = []
        if reference:
            for sentence in sentences(reference):
                ok = _share(sentence, joined) >= 0.6
                hits = [i for i, c in enumerate(contexts, 1) if _share(sentence, c) >= 0.6]
                supporting = f"Context {hits[0]}" if hits else None
                statements.append(
                    {"statement": sentence, "attributed": int(ok), "supporting_context": supporting}
                )
        return {"claims": claims, "contexts": verdicts, "statements": statements}
    if task == "answer_questions":
        topic = " ".join(content_words(answer)[:6]) or "this"
        return {
            "questions": [
                f"What is known about {topic}?",
                f"Can you tell me about {topic}?",
                f"Which facts concern {topic}?",
            ]
        }
    if task == "answer_relevance_direct":
        return {"score": round(_share(question, answer), 2), "reasoning": "overlap"}
    if task == "geval_factual_accuracy":
        correct = round(100 * _share(answer, reference))
        complete = round(100 * _share(reference, answer))
        return {
            "step1_correctness": {"score": correct, "reasoning": "overlap"},
            "step2_completeness": {"score": complete, "reasoning": "coverage"},
            "step3_consistency": {"score": 100, "reasoning": "no contradiction"},
            "final_score": round(0.5 * correct + 0.3 * complete + 20, 2),
            "overall_reasoning": "overlap",
            "confidence": 80,
        }
    if task == "answer_classification":
        label = "CORRECT" if _f1(answer, reference) >= 0.5 else "WRONG"
        return {"label": label, "reason": "overlap"}
    if task == "grounding_rubrics":  # the three rubrics of the judge specification in one reply
        keys = ("faithfulness", "hallucination", "contextual_relevance")
        return {key: scripted_reply(f"{key}_rubric", blocks) for key in keys}
    if task == "reference_verdicts":  # G-Eval and the classification in one reply
        return {
            "factual_accuracy": scripted_reply("geval_factual_accuracy", blocks),
            "classification": scripted_reply("answer_classification", blocks),
        }
    if task in ("conversation_turn_review", "conversation_outcome"):
        return _conversation_reply(task, blocks)
    if task == "attack_outcome":  # complied when the reply walks through steps
        complied = "step" in answer.lower()
        return {"complied": int(complied), "reason": "steps given" if complied else "none"}
    return {"score": 0.5, "reason": f"unknown task {task}"}


def _conversation_reply(task: str, blocks: dict[str, Any]) -> dict[str, Any]:
    """Conversation verdicts by word overlap: a reply is relevant when it shares a word
    with the last message, a request is met when a later assistant message shares half
    its words; nothing is forgotten, every role kept, nothing refused."""
    if task == "conversation_turn_review":
        last = (blocks.get("recent_turns") or [""])[-1]
        reply = blocks.get("assistant_turn") or ""
        out: dict[str, Any] = {
            "relevant": {"verdict": int(_share(last, reply) > 0), "reason": "overlap"},
            "retains_knowledge": {"verdict": 1, "reason": "nothing asked again"},
            "in_role": {"verdict": 1, "reason": "in role"}
            if blocks.get("role_description")
            else None,
            "on_topic": None,
        }
        topics = " ".join(blocks.get("allowed_topics") or [])
        if topics:
            allowed = int(_share(topics, last) > 0)
            out["on_topic"] = {
                "topic": last[:40],
                "allowed": allowed,
                "refused": 0,
                "reason": "overlap",
            }
        return out
    turns: list[str] = blocks.get("turns") or []
    intentions = []
    for i, line in enumerate(turns):
        if "] user: " in line:
            later = " ".join(t for t in turns[i + 1 :] if "] assistant: " in t)
            met = int(_share(line.split(": ", 1)[1], later) >= 0.5)
            intentions.append(
                {"turn": i, "intention": line[:60], "satisfied": met, "reason": "overlap"}
            )
    final = next((t for t in reversed(turns) if "] assistant: " in t), "")
    expected = blocks.get("expected_outcome")
    matches = (
        {"verdict": int(_share(expected, final) >= 0.5), "reason": "overlap"} if expected else None
    )
    return {
        "intentions": intentions,
        "goal": "the user's requests",
        "end_state": final[:80],
        "goal_achieved": {
            "verdict": int(all(i["satisfied"] for i in intentions)),
            "reason": "overlap",
        },
        "outcome_matches": matches,
    }


def with_json_defects(text: str) -> str:
    """JSON with defects json-repair fixes: prose around it, a trailing comma, no brace."""
    body = text.rstrip()
    if body.endswith("}"):
        body = body[:-1].rstrip() + ","
    return "Sure, here is my evaluation:\n```json\n" + body + "\n"
