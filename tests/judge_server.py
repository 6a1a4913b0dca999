"""An OpenAI-compatible chat-completions server for tests and benchmarks (real HTTP).

`JudgeServer` listens on 127.0.0.1 (a free port) in a background thread and answers
``POST /v1/chat/completions`` like a judge model would, deterministically: it reads the
task id from the system message (``Task: rag_verdicts@1``) and the tagged data blocks
from the user message, and scores them by word overlap (`scripted_reply`). Tests steer
it with attributes:

- ``delay``: seconds to wait before each reply;
- ``fail_429`` / ``fail_500``: the next N requests get HTTP 429 / 500;
- ``broken_json``: the next N replies are JSON with defects json-repair can fix;
- ``garbage``: the next N replies are not JSON at all (no number, no label either);
- ``html``: the next N requests get an HTML page with status 200 (a wrong base URL);
- ``retry_after``: the ``Retry-After`` header of the 429 replies (default ``"0"``);
- ``max_prompt_chars``: longer prompts get HTTP 400 "maximum context length" in any
  ``response_format`` (0: no limit);
- ``reject_formats``: ``response_format`` types answered with HTTP 400;
- ``script``: a function ``(task, blocks, body) -> str | dict | None`` whose non-None
  result replaces the default reply (a dict is sent as JSON);
- ``by_model``: a script per model name, ahead of ``script``: one server acts as several
  judges that disagree (a judge panel), told apart by the request's ``model``;
- ``unknown_models``: model names answered HTTP 404 "model does not exist" (a judge of
  a panel that fails every question, at once: a 404 is not retried).

Faults (`FAULTS`), for the adversarial tests and ``benchmarks/faults.py``: ``faults`` is a
list of fault kinds the next requests get, in order (a script; ``None`` is a normal
reply); ``inject(rate, kinds, seed)`` then gives each later request one of ``kinds`` with
probability ``rate`` (a seeded RNG); ``storm(seconds)`` answers every request 429 with
``Retry-After`` for that long (from the next request, or a later one). The kinds:

- ``429`` (with ``Retry-After: retry_after``), ``500``;
- ``hang``: no reply for ``hang_seconds`` (the client must time out);
- ``reset``: half the body, then the connection is reset (TCP RST);
- ``drip``: the whole, valid reply trickled over ``drip_seconds`` (the client's per-call
  timeout must bound it);
- ``prose``: the score in prose after a quoted decoy (``The answer says "score: 1.0" ...
  my score is 0.4.``); ``ambiguous``: prose stating two scores, neither marked as given;
- ``empty``: ``choices: []``; ``no_message``: a choice without ``message``;
  ``null_content``: ``message.content`` null; ``refusal``: ``message.refusal`` set;
  ``length``: half the reply with ``finish_reason: "length"``; ``filtered``: no content,
  ``finish_reason: "content_filter"``.

``faults_served`` counts the faults given, by kind.

``batch`` is the server's OpenAI Batch API (``/v1/files``, ``/v1/batches``: see
`judge_batch_api`); the lines it answers are counted in ``batch_lines`` and kept in
``batch_requests``, not in ``calls``.

``calls`` counts every request received; ``requests`` keeps their JSON bodies and
``arrivals`` the ``time.monotonic()`` each arrived at;
``prompt_tokens`` / ``completion_tokens`` total the usage it reported, and
``tokens_by_model`` the (prompt, completion) tokens it reported per model;
``calls_by_model()`` counts the requests per model and ``auth_by_model`` keeps the
``Authorization`` header each model's requests came with.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judge_batch_api import BatchAPI
from judge_scripts import parse_blocks, scripted_reply, with_json_defects

__all__ = ["FAULTS", "JudgeServer", "parse_blocks", "scripted_reply"]

Script = Callable[[str, dict[str, Any], dict[str, Any]], "str | dict[str, Any] | None"]

#: every fault kind the server can inject (see the module docstring)
FAULTS: tuple[str, ...] = (
    "429",
    "500",
    "hang",
    "reset",
    "drip",
    "prose",
    "ambiguous",
    "empty",
    "no_message",
    "null_content",
    "refusal",
    "length",
    "filtered",
)
#: faults that break the transport, not the reply: the handler carries them out
_TRANSPORT = frozenset({"reset", "drip"})

_TASK = re.compile(r"Task: ([\w.-]+)@")


class JudgeServer:
    """A scripted OpenAI-compatible judge on 127.0.0.1 (use as a context manager)."""

    def __init__(self, delay: float = 0.0, script: Script | None = None) -> None:
        self.delay = delay
        self.script = script
        self.fail_429 = 0
        self.fail_500 = 0
        self.broken_json = 0
        self.garbage = 0
        self.html = 0
        self.retry_after = "0"
        self.max_prompt_chars = 0
        self.reject_formats: set[str] = set()
        self.by_model: dict[str, Script] = {}
        self.unknown_models: set[str] = set()
        self.tokens_by_model: dict[str, tuple[int, int]] = {}
        self.auth_by_model: dict[str, str | None] = {}
        self.echo_auth = False  # answer 401 quoting the request's Authorization header
        self.faults: list[str | None] = []
        self.fault_rate = 0.0
        self.fault_kinds: tuple[str, ...] = FAULTS
        self.storm_until = 0.0  # time.monotonic() until which every request gets 429
        self._storm = (0.0, 0)  # a storm to come: (its seconds, the call count it follows)
        self.hang_seconds = 30.0
        self.drip_seconds = 5.0
        self.faults_served: Counter[str] = Counter()
        self._rng = random.Random(0)
        self._stopping = threading.Event()
        self.calls = 0
        self.requests: list[dict[str, Any]] = []
        self.batch_lines = 0
        self.batch_requests: list[dict[str, Any]] = []
        self.batch = BatchAPI(self)
        self.arrivals: list[float] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> JudgeServer:
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _handler(self))
        self._server = server
        # shutdown() waits for the loop's next poll: 0.05 s, not the default 0.5 s
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # hanging and dripping replies end now
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self) -> None:
        with self._lock:
            self.calls = 0
            self.requests = []
            self.batch_lines = 0
            self.batch_requests = []
            self.batch = BatchAPI(self)
            self.arrivals = []
            self.prompt_tokens = 0
            self.completion_tokens = 0
            self.tokens_by_model = {}
            self.auth_by_model = {}
            self.by_model = {}
            self.unknown_models = set()
            self.max_in_flight = 0
            self.fail_429 = self.fail_500 = self.broken_json = self.garbage = self.html = 0
            self.retry_after = "0"
            self.max_prompt_chars = 0
            self.reject_formats = set()
            self.faults = []
            self.fault_rate = 0.0
            self.storm_until, self._storm = 0.0, (0.0, 0)
            self.faults_served = Counter()

    def inject(self, rate: float, kinds: Iterable[str] = FAULTS, seed: int = 0) -> None:
        """From now on each request gets one of ``kinds`` (drawn uniformly) with
        probability ``rate``, from an RNG seeded with ``seed``."""
        kinds = tuple(kinds)
        unknown = set(kinds) - set(FAULTS)
        if unknown or not kinds or not 0.0 <= rate <= 1.0:
            raise ValueError(f"inject takes a rate in [0, 1] and kinds of {FAULTS}")
        with self._lock:
            self.fault_rate, self.fault_kinds, self._rng = rate, kinds, random.Random(seed)

    def storm(self, seconds: float, retry_after: str = "1", after: int = 0) -> None:
        """Answer every request 429 with ``Retry-After: retry_after`` for ``seconds``
        from the arrival of the request that follows the next ``after`` ones."""
        with self._lock:
            self._storm, self.storm_until = (seconds, self.calls + after), 0.0
            self.retry_after = retry_after

    def _fault(self) -> str | None:
        """The fault this request gets (called under the lock)."""
        fault: str | None = None
        seconds, start = self._storm
        if seconds and self.calls > start:
            self.storm_until, self._storm = time.monotonic() + seconds, (0.0, 0)
        if time.monotonic() < self.storm_until:
            fault = "429"
        elif self.faults:
            fault = self.faults.pop(0)
        elif self.fault_rate and self._rng.random() < self.fault_rate:
            fault = self._rng.choice(self.fault_kinds)
        elif self.fail_429 > 0:
            self.fail_429 -= 1
            fault = "429"
        elif self.fail_500 > 0:
            self.fail_500 -= 1
            fault = "500"
        elif self.html > 0:
            self.html -= 1
            fault = "html"
        if fault is not None:
            self.faults_served[fault] += 1
        return fault

    def calls_by_model(self) -> dict[str, int]:
        """The requests received per model name (direct calls, not batch lines)."""
        return dict(Counter(str(body.get("model")) for body in self.requests))

    def calls_by_task(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for body in self.requests:
            task = _task_of(body)
            out[task] = out.get(task, 0) + 1
        return out

    # ---- one request ---------------------------------------------------------------------
    def handle(
        self, body: dict[str, Any], via_batch: bool = False
    ) -> tuple[int, dict[str, Any] | str, dict[str, str], str | None]:
        """(status, JSON reply or HTML text, extra headers, transport fault or None) for
        one request body (a batch line's with ``via_batch``)."""
        with self._lock:
            if via_batch:
                self.batch_lines += 1
                self.batch_requests.append(body)
            else:
                self.calls += 1
                self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            fault = self._fault()
            broken = garbage = False
            if fault is None and self.garbage > 0:
                self.garbage -= 1
                garbage = True
            elif fault is None and self.broken_json > 0:
                self.broken_json -= 1
                broken = True
        try:
            if self.delay:
                time.sleep(self.delay)
            if fault == "hang":
                self._stopping.wait(self.hang_seconds)
            if fault == "429":
                error = {"error": {"message": "rate limited", "type": "rate_limit"}}
                return 429, error, {"Retry-After": self.retry_after}, None
            if fault == "500":
                return 500, {"error": {"message": "server error", "type": "server"}}, {}, None
            if fault == "html":
                return 200, "<html><body><h1>Welcome to nginx!</h1></body></html>", {}, None
            messages = body.get("messages") or []
            prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
            if self.max_prompt_chars and prompt_chars > self.max_prompt_chars:
                message = (
                    f"This model's maximum context length is {self.max_prompt_chars // 4} "
                    f"tokens; your messages have about {prompt_chars // 4}"
                )
                return 400, {"error": {"message": message, "type": "invalid_request"}}, {}, None
            model = str(body.get("model", "test-judge"))
            if model in self.unknown_models:
                message = f"The model `{model}` does not exist or you do not have access to it."
                return 404, {"error": {"message": message, "type": "invalid_request"}}, {}, None
            fmt = (body.get("response_format") or {}).get("type")
            if fmt in self.reject_formats:
                message = f"response_format {fmt} is not supported"
                return 400, {"error": {"message": message, "type": "invalid_request"}}, {}, None
            task = _task_of(body)
            user = next((m["content"] for m in messages if m.get("role") == "user"), "")
            blocks = parse_blocks(user)
            reply: str | dict[str, Any] | None = None
            script = self.by_model.get(model, self.script)
            if script is not None:
                reply = script(task, blocks, body)
            if reply is None:
                reply = scripted_reply(task, blocks)
            content = reply if isinstance(reply, str) else json.dumps(reply)
            if garbage:
                content = "I am unable to comply with the requested format today."
            elif broken:
                content = with_json_defects(content)
            choice = _choice(fault, reply, content)
            text = (choice.get("message") or {}).get("content") or ""
            p_tok, c_tok = prompt_chars // 4 + 1, len(text) // 4 + 1
            with self._lock:
                self.prompt_tokens += p_tok
                self.completion_tokens += c_tok
                before = self.tokens_by_model.get(model, (0, 0))
                self.tokens_by_model[model] = (before[0] + p_tok, before[1] + c_tok)
            completion = {
                "id": f"chatcmpl-{self.calls + self.batch_lines}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "test-judge"),
                "choices": [] if fault == "empty" else [choice],
                "usage": {
                    "prompt_tokens": p_tok,
                    "completion_tokens": c_tok,
                    "total_tokens": p_tok + c_tok,
                },
            }
            return 200, completion, {}, fault if fault in _TRANSPORT else None
        finally:
            with self._lock:
                self._in_flight -= 1


def _choice(fault: str | None, reply: str | dict[str, Any], content: str) -> dict[str, Any]:
    """The completion's one choice, as the fault (if any) shapes it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
    given = reply if isinstance(reply, dict) else {}
    if fault == "prose":
        if "score" in given:
            message["content"] = (
                'The answer says "score: 1.0", which is text under review, not my verdict. '
                f"My score is {given['score']}."
            )
        elif "label" in given:
            message["content"] = f"Having compared it with the reference, it is {given['label']}."
        else:
            message["content"] = "Here is my verdict: " + content
    elif fault == "ambiguous":
        if "score" in given:
            other = 0.9 if float(given["score"]) < 0.5 else 0.1
            message["content"] = (
                f"The answer could merit a score of {given['score']}, or a score of {other} "
                "if read generously."
            )
        else:
            message["content"] = "It is partly CORRECT and partly WRONG; hard to say."
    elif fault == "length":
        message["content"] = content[: len(content) // 2]
        choice["finish_reason"] = "length"
    elif fault == "null_content":
        message["content"] = None
    elif fault == "filtered":
        message["content"] = None
        choice["finish_reason"] = "content_filter"
    elif fault == "refusal":
        message.update(content=None, refusal="I can't help with evaluating this content.")
    elif fault == "no_message":
        del choice["message"]
    return choice


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 drops concurrent connects


def _task_of(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            match = _TASK.search(str(message.get("content", "")))
            if match:
                return match.group(1)
    return "unknown"


def _handler(owner: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body are two writes: with Nagle's algorithm on, the body waited for
        # the client's delayed ACK of the headers (40 ms on Linux), as no real server does
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(
            self, status: int, payload: dict[str, Any] | str, headers: dict[str, str]
        ) -> None:
            is_text = isinstance(payload, str)
            data = (payload if is_text else json.dumps(payload)).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if is_text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _reply(self, reply: tuple[int, dict[str, Any] | bytes]) -> None:
            """A Batch API reply: JSON, or a file's bytes."""
            status, payload = reply
            if isinstance(payload, dict):
                self._send(status, payload, {})
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            batch_reply = owner.batch.get(self.path)
            if batch_reply is not None:
                self._reply(batch_reply)
            elif self.path.rstrip("/").endswith("/stats"):
                stats = {
                    "calls": owner.calls,
                    "max_in_flight": owner.max_in_flight,
                    "calls_by_task": owner.calls_by_task(),
                    "faults": dict(owner.faults_served),
                }
                self._send(200, stats, {})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            batch_reply = owner.batch.post(self.path, self.headers.get("Content-Type", ""), raw)
            if batch_reply is not None:
                self._reply(batch_reply)
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            if owner.echo_auth:
                owner.calls += 1
                message = f"invalid credentials: {self.headers.get('Authorization')}"
                self._send(401, {"error": {"message": message, "type": "auth"}}, {})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, {"error": {"message": "body is not JSON"}}, {})
                return
            owner.auth_by_model[str(body.get("model"))] = self.headers.get("Authorization")
            transport: str | None = None
            try:
                status, payload, headers, transport = owner.handle(body)
            except Exception as exc:  # a bug in a test script: answer 500, keep serving
                status, payload, headers = 500, {"error": {"message": repr(exc)}}, {}
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if transport == "reset":
                    self._reset(payload)
                elif transport == "drip":
                    self._drip(payload)
                else:
                    self._send(status, payload, headers)  # the client may have timed out

        def _head(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()

        def _reset(self, payload: dict[str, Any] | str) -> None:
            """Half the body, then a TCP reset (SO_LINGER 0) instead of the rest."""
            data = json.dumps(payload).encode("utf-8")
            self._head(data)
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

        def _drip(self, payload: dict[str, Any] | str) -> None:
            """The whole body in 20 pieces spread over ``drip_seconds``."""
            data = json.dumps(payload).encode("utf-8")
            self._head(data)
            self.wfile.flush()
            step = -(-len(data) // 20)
            for i in range(0, len(data), step):
                if owner._stopping.wait(owner.drip_seconds / 20):
                    break
                self.wfile.write(data[i : i + step])
                self.wfile.flush()
            self.close_connection = True

    return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve from the command line (a separate process, as a real judge would be):
    ``python tests/judge_server.py --delay 0.2 --fault-rate 0.1`` prints the base URL,
    then serves until killed. ``GET /v1/stats`` returns the call and fault counts and
    the most requests that were in flight at once."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per reply")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of faulty replies")
    parser.add_argument("--fault-kinds", default=",".join(FAULTS), help="comma separated")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault RNG")
    args = parser.parse_args(argv)
    server = JudgeServer(delay=args.delay)
    server.inject(args.fault_rate, args.fault_kinds.split(","), args.seed)
    server.start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        sys.exit(0)


if __name__ == "__main__":
    main()
