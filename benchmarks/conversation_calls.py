"""Judge calls and judge time of the ``conversation`` suite on generated chats.

``python benchmarks/conversation_calls.py`` starts the scripted OpenAI-compatible test
server (``tests/judge_server.py``) in its own process with a fixed delay per call
(default 200 ms), generates ``--chats`` support chats of 10 turns (messages, as chat logs
count them: 5 user messages and 5 assistant replies) and of 20 turns, and scores them
with the whole ``conversation`` suite (the seven conversation and agent-goal metrics)
through ``assay.evaluate``. It prints the calls the server received per chat and per
turn, and the wall time. Goal (issue 14): at most one call per turn for the whole suite.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from judge_speed import start_server  # the test judge server in its own process

REQUESTS = [
    ("Where is my parcel 4417?", "Parcel 4417 left the Leeds depot this morning."),
    ("When will it arrive?", "It should arrive tomorrow before noon."),
    ("Can I change the delivery address?", "Yes, until it is out for delivery."),
    ("Please deliver it to my office instead.", "Done: it will go to your office."),
    ("Do you offer refunds for late parcels?", "Late parcels are refunded within 14 days."),
    ("How do I request that refund?", "Use the refund form under My parcels."),
    ("Is there a fee for the address change?", "No, address changes are free."),
    ("Can you text me when it arrives?", "Text alerts are now on for parcel 4417."),
    ("What if nobody is at the office?", "The driver leaves it at reception."),
    ("Thanks, that is everything.", "You're welcome, have a good day."),
]


def chat(turns: int, n: int) -> Sample:
    messages = []
    for i in range(turns // 2):
        ask, reply = REQUESTS[(i + n) % len(REQUESTS)]
        messages += [
            {"role": "user", "content": f"{ask} (chat {n})"},
            {"role": "assistant", "content": reply},
        ]
    return Sample(
        id=f"chat-{turns}-{n}",
        turns=messages,
        role_description="A polite support agent for ShipIt parcels.",
        allowed_topics=["parcel delivery", "refunds"],
        expected_outcome="The parcel is redirected to the user's office.",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per judge call")
    parser.add_argument("--chats", type=int, default=10, help="chats of each length")
    args = parser.parse_args()
    proc, url = start_server(args.delay)
    try:
        embedder = Resources(AssayConfig()).embedder
        embedder.embed(["warm up"])
        for turns in (10, 20):
            samples = [chat(turns, n) for n in range(args.chats)]
            config = AssayConfig(judge_base_url=url, judge_model="test-judge", judge_cache=False)
            res = Resources(config)
            res.__dict__["embedder"] = embedder
            started = time.perf_counter()
            run = evaluate(samples, suites=["conversation"], resources=res)
            wall = time.perf_counter() - started
            calls = res.judge.usage.calls
            errors = sum(r.error is not None for rs in run.results for r in rs.values())
            print(
                f"{turns}-turn chats x{args.chats}: {calls / args.chats:.1f} calls per chat "
                f"({calls / (args.chats * turns):.2f} per turn; {turns // 2} replies + 1), "
                f"{len(run.metrics)} metrics, {errors} errors, {wall:.2f} s wall "
                f"({args.delay * 1000:.0f} ms per call)"
            )
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
