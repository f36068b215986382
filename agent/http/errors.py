"""OpenAI's error body, which every local server of factweave answers an error with: the
OpenAI-compatible server (:mod:`agent.serve`), vLLM's under the request checks, and the request
checks themselves (:mod:`.origins`), so a client reads a refusal as it reads any API error."""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An HTTP error answered with OpenAI's error body: ``{"error": {message, type, param, code}}``.

    Example::

        >>> raise ApiError(404, "model 'x' not found", code="model_not_found", param="model")
        Traceback (most recent call last):
            ...
        agent.http.errors.ApiError: model 'x' not found
    """

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", *,
                 code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.code, self.param, self.headers = code, param, headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.code, self.param)


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
