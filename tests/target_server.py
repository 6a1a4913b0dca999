"""A real HTTP server on 127.0.0.1 playing the application under test for ``assay run``.

- ``POST /v1/chat/completions``: an OpenAI-compatible endpoint that streams its answer
  (server-sent events) when asked to: the first token after ``first_token_delay``
  seconds, the rest after ``rest_delay``, then a usage chunk and ``[DONE]``; without
  ``stream`` one JSON completion. The answer is ``answer_prefix`` + the last user message.
- ``POST /rag``: a JSON application: reads ``question`` from the body and answers
  ``{"answer": ..., "sources": [{"text": ...}, ...]}``.

``script`` is a list of what the next requests get instead of an answer, one entry a
request: ``("status", code, body, headers)``, ``("hang", seconds)``, ``("text",
body)`` or ``("reply", headers, chunks)``: status 200 with exactly these headers and the
byte strings of ``chunks`` (an iterable, endless if need be; written until the client
stops reading), then the connection closed. Every request's path, headers and body are
kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TargetServer:
    def __init__(self) -> None:
        self.first_token_delay = 0.0
        self.rest_delay = 0.0
        self.answer_prefix = "Answer: "
        self.script: list[tuple[Any, ...]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # each write goes out at once: no 40 ms wait for a delayed ACK between a
            # reply's head and its body
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": raw}
                    )
                    step = server.script.pop(0) if server.script else None
                if step is not None and step[0] == "hang":
                    time.sleep(step[1])
                    return self._send(200, b"{}", "application/json")
                if step is not None and step[0] == "status":
                    _, code, body, headers = step
                    return self._send(code, body.encode(), "application/json", headers)
                if step is not None and step[0] == "text":
                    return self._send(200, step[1].encode(), "text/html")
                if step is not None and step[0] == "reply":
                    return self._reply(step[1], step[2])
                body = json.loads(raw)
                if self.path == "/rag":
                    question = body["question"]
                    reply = {
                        "answer": f"{server.answer_prefix}{question}",
                        "sources": [{"text": f"source about {question}"}, {"text": "more"}],
                    }
                    return self._send(200, json.dumps(reply).encode(), "application/json")
                return self._chat(body)

            def _chat(self, body: dict[str, Any]) -> None:
                user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                words = (server.answer_prefix + user).split(" ")
                usage = {"prompt_tokens": 7, "completion_tokens": len(words), "total_tokens": 9}
                if not body.get("stream"):
                    reply = {
                        "choices": [{"message": {"role": "assistant", "content": " ".join(words)}}],
                        "usage": usage,
                    }
                    return self._send(200, json.dumps(reply).encode(), "application/json")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                time.sleep(server.first_token_delay)
                for i, word in enumerate(words):
                    if i == 1:
                        time.sleep(server.rest_delay)
                    text = word if i == 0 else " " + word
                    self._event({"choices": [{"delta": {"content": text}}]})
                self._event({"choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _reply(self, headers: dict[str, str], chunks: Iterable[bytes]) -> None:
                self.close_connection = True
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                    self.wfile.flush()
                except OSError:  # the client stopped reading: expected
                    return

            def _event(self, payload: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

            def _send(
                self,
                code: int,
                body: bytes,
                content_type: str,
                headers: dict[str, str] | None = None,
            ) -> None:
                self.send_response(code)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a client that gave up on a hanging reply breaks the pipe: expected, not printed
        self._server.handle_error = lambda *args: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # shutdown() waits for the loop's next poll: 0.05 s, not the default 0.5 s
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> TargetServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
