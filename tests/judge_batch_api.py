"""The OpenAI Batch API of the test judge server (`judge_server.JudgeServer.batch`).

As OpenAI documents it:

- ``POST /v1/files`` (multipart: ``purpose`` and ``file``) keeps a file and answers the
  file object (``{"id": "file-…", "object": "file", "bytes", "created_at", "filename",
  "purpose"}``); a purpose other than ``batch`` is refused with 400;
- ``GET /v1/files/{id}/content`` sends a file's bytes; ``GET /v1/files/{id}`` its object;
- ``POST /v1/batches`` (``input_file_id``, ``endpoint`` ``/v1/chat/completions``,
  ``completion_window`` ``24h``) answers the batch object in status ``validating``;
  ``GET /v1/batches/{id}`` answers it, each poll moving it on: ``validating`` ->
  ``in_progress`` -> ``completed`` (or ``failed`` when its input file has a malformed
  line, with ``errors.data``); ``POST /v1/batches/{id}/cancel`` cancels it.
- On completion every input line is answered as the chat endpoint would answer it
  (`JudgeServer.handle`, counted in ``batch_lines``, not in ``calls``), and the batch gets
  an output file of the lines answered 200 (``{"id", "custom_id", "response":
  {"status_code", "request_id", "body"}, "error": null}``) and an error file of the
  others, with ``request_counts``.

Steering: ``hold`` keeps every batch ``in_progress``; ``error_lines`` gives the next N
lines an error line (``"response": null, "error": {"code", "message"}``) in the error
file; ``drop_lines`` leaves the next N lines out of both files. Counters: ``uploads``,
``created``, ``polls``, ``downloads``; ``batch_ids`` in creation order.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_server import JudgeServer

__all__ = ["BatchAPI"]

Reply = tuple[int, dict[str, Any] | bytes]


def _error(status: int, message: str) -> Reply:
    return status, {"error": {"message": message, "type": "invalid_request_error"}}


def form_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (file name, bytes)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


class BatchAPI:
    """Files and batches of one test server (see the module)."""

    def __init__(self, owner: JudgeServer) -> None:
        self.owner = owner
        self.files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_ids: list[str] = []
        self.hold = False
        self.error_lines = 0
        self.drop_lines = 0
        self.uploads = self.created = self.polls = self.downloads = 0
        self._lock = threading.Lock()

    # ---- routes --------------------------------------------------------------------------
    def post(self, path: str, content_type: str, raw: bytes) -> Reply | None:
        """The reply to a POST under /v1 (None: not a Batch API route)."""
        parts = path.strip("/").split("/")[1:]  # after "v1"
        if parts == ["files"]:
            return self._upload(content_type, raw)
        if parts == ["batches"]:
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return _error(400, "body is not JSON")
            return self._create(body)
        if len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel":
            return self._cancel(parts[1])
        return None

    def get(self, path: str) -> Reply | None:
        """The reply to a GET under /v1 (None: not a Batch API route)."""
        parts = path.strip("/").split("/")[1:]
        if len(parts) == 2 and parts[0] == "batches":
            return self._retrieve(parts[1])
        if len(parts) in (2, 3) and parts[0] == "files":
            found = self.files.get(parts[1])
            if found is None:
                return _error(404, f"No such File object: {parts[1]}")
            if len(parts) == 2:
                return 200, found[0]
            if parts[2] == "content":
                with self._lock:
                    self.downloads += 1
                return 200, found[1]
        return None

    # ---- files ---------------------------------------------------------------------------
    def _keep(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1:04d}"
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
        }
        self.files[file_id] = (meta, data)
        return meta

    def _upload(self, content_type: str, raw: bytes) -> Reply:
        if "multipart/form-data" not in content_type:
            return _error(400, "a file upload is multipart/form-data")
        fields = form_fields(content_type, raw)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if purpose != "batch" or "file" not in fields:
            return _error(400, f"purpose must be 'batch' with a file; got {purpose!r}")
        filename, data = fields["file"]
        with self._lock:
            self.uploads += 1
            return 200, self._keep(data, filename or "upload.jsonl", purpose)

    # ---- batches -------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> Reply:
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return _error(400, f"input_file_id {file_id!r} is not a file")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, f"endpoint {body.get('endpoint')!r} is not supported")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'")
        with self._lock:
            self.created += 1
            batch_id = f"batch_{self.created:04d}"
            lines = self.files[file_id][1].decode().splitlines()
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": "/v1/chat/completions",
                "errors": None,
                "input_file_id": file_id,
                "completion_window": "24h",
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": None,
            }
            self.batch_ids.append(batch_id)
            return 200, dict(self.batches[batch_id])

    def _cancel(self, batch_id: str) -> Reply:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return _error(404, f"No such Batch object: {batch_id}")
            if batch["status"] in ("validating", "in_progress"):
                batch["status"] = "cancelled"
                batch["cancelled_at"] = int(time.time())
            return 200, dict(batch)

    def _retrieve(self, batch_id: str) -> Reply:
        with self._lock:
            self.polls += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return _error(404, f"No such Batch object: {batch_id}")
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
                batch["in_progress_at"] = int(time.time())
                return 200, dict(batch)
            if batch["status"] != "in_progress" or self.hold:
                return 200, dict(batch)
            batch["status"] = "finalizing"  # a poll meanwhile sees it so
        self._run(batch)  # outside the lock: the lines are answered as requests are
        return 200, dict(batch)

    def _run(self, batch: dict[str, Any]) -> None:
        """Answer every line of the batch's input file and write its two files."""
        lines = self.files[batch["input_file_id"]][1].decode().splitlines()
        requests = []
        for number, line in enumerate(lines, 1):
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            if not isinstance(request, dict) or not {"custom_id", "body"} <= request.keys():
                batch["status"] = "failed"
                error = {"code": "invalid_json_line", "message": "a line is malformed"}
                batch["errors"] = {"object": "list", "data": [{**error, "line": number}]}
                return
            requests.append(request)
        output, errors = [], []
        for n, request in enumerate(requests, 1):
            line_id, custom_id = f"batch_req_{batch['id']}_{n}", request["custom_id"]
            with self._lock:
                fault = "drop" if self.drop_lines > 0 else "error" if self.error_lines > 0 else ""
                if fault == "drop":
                    self.drop_lines -= 1
                elif fault == "error":
                    self.error_lines -= 1
            if fault == "drop":
                continue
            if fault == "error":
                failure = {"code": "server_error", "message": "the request could not be run"}
                errors.append(
                    {"id": line_id, "custom_id": custom_id, "response": None, "error": failure}
                )
                continue
            status, payload, _, _ = self.owner.handle(request["body"], via_batch=True)
            response = {"status_code": status, "request_id": f"req_{n}", "body": payload}
            entry = {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
            (output if status == 200 else errors).append(entry)
        with self._lock:
            for key, rows in (("output_file_id", output), ("error_file_id", errors)):
                if rows:
                    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                    batch[key] = self._keep(data, f"{batch['id']}_{key}.jsonl", "batch_output")[
                        "id"
                    ]
            batch["request_counts"] = {
                "total": len(lines),
                "completed": len(output),
                "failed": len(lines) - len(output),
            }
            batch["status"] = "completed"
            batch["completed_at"] = int(time.time())
