"""What a judge server's reply means: the judge's errors, and the answer a chat
completion holds, whether it came from a direct request or a batch line (the same
reading for both, so a batch run's values and errors are a direct run's)."""

from __future__ import annotations

from typing import Any

from assay.core.http import Unreachable

__all__ = [
    "JudgeError",
    "JudgeUnreachable",
    "completion_content",
    "describe_failure",
    "json_field",
    "token_count",
]


class JudgeError(RuntimeError):
    """A judge question failed for good (after retries, or unparsable twice)."""


class JudgeUnreachable(JudgeError, Unreachable):
    """The judge server cannot be reached: the client's circuit is open (a question
    failed to connect before the server ever answered, or `UNREACHABLE_AFTER` did in a
    row)."""


def completion_content(completion: Any, base_url: str | None, max_tokens: int | None) -> str:
    """The reply text of a chat completion; `JudgeError` with the reason for anything
    else (a per-sample error: asking the same question again gets the same reply)."""
    choices = json_field(completion, "choices")
    if not isinstance(choices, list):
        if isinstance(completion, str):
            got = "text: " + " ".join(completion.split())[:120]
        else:
            shown = (
                {k: v for k, v in completion.items() if v is not None}
                if isinstance(completion, dict)
                else completion
            )
            got = f"JSON without 'choices': {str(shown)[:120]}"
        raise JudgeError(
            f"judge server at {base_url} did not answer with a chat completion "
            f"({got}); is base_url its OpenAI-compatible /v1 address?"
        )
    if not choices:
        raise JudgeError("the judge's reply has no choices (an empty 'choices' list)")
    choice = choices[0]
    message = json_field(choice, "message")
    if message is None:
        raise JudgeError("the judge's reply has no message (choices[0] has no 'message')")
    content = json_field(message, "content")
    refusal = json_field(message, "refusal")
    if refusal:
        raise JudgeError(f"the judge refused to answer: {refusal}")
    finish = json_field(choice, "finish_reason")
    if finish == "length":
        raise JudgeError(
            "the judge's reply was cut off at the token limit (finish_reason 'length')"
            + (f"; max_tokens is {max_tokens}" if max_tokens else "")
        )
    if finish == "content_filter":
        raise JudgeError("the judge's reply was withheld by the server's content filter")
    if not isinstance(content, str) or not content.strip():
        shown = "null" if content is None else repr(content)[:40]
        raise JudgeError(f"the judge's reply has no content (message.content is {shown})")
    return content


def json_field(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object; None for anything else (a reply of another shape)."""
    return value.get(name) if isinstance(value, dict) else None


def token_count(value: Any) -> int:
    """A token count of a reply's ``usage``; 0 for anything that is not a count."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def describe_failure(error: BaseException) -> str:
    """A failed request in a few words: ``timed out``, ``HTTP 503: ...``, or the error."""
    if isinstance(error, TimeoutError):
        return "timed out"
    status = getattr(error, "status_code", None)
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"HTTP {status}: {text}" if status else f"{type(error).__name__}: {text}"
