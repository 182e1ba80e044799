"""Calling a procedure's HTTP tools: rendered request, timeout, failures as results, redaction."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from helpline.agent.procedures import ToolResult
from helpline.agentconfig.schema import Tool
from helpline.agentconfig.templates import render_tool_request

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"}
MAX_RESPONSE_BYTES = 1_000_000


@dataclass
class ToolCaller:
    """Calls tools for one conversation turn and remembers each request (redacted) for audit."""

    client: httpx.AsyncClient
    user_token: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    def redact(self, value: str) -> str:
        """Hide the user token wherever it was interpolated."""
        if self.user_token:
            return value.replace(self.user_token, REDACTED)
        return value

    async def __call__(self, tool: Tool, inputs: dict[str, Any]) -> ToolResult:
        request = render_tool_request(tool, inputs, self.user_token)
        self.requests.append({
            "method": request.method,
            "url": self.redact(request.url),
            "headers": {
                name: REDACTED if name.lower() in SECRET_HEADERS else self.redact(value)
                for name, value in request.headers.items()
            },
        })
        try:
            response = await self.client.request(
                request.method,
                request.url,
                headers=request.headers,
                params=request.params or None,
                json=request.json_body,
                timeout=tool.timeout,
            )
        except httpx.TimeoutException:
            return ToolResult(ok=False, error=f"timed out after {tool.timeout:g}s")
        except httpx.HTTPError as exc:
            return ToolResult(ok=False, error=f"request failed: {type(exc).__name__}")
        if len(response.content) > MAX_RESPONSE_BYTES:
            return ToolResult(ok=False, status=response.status_code, error="response too large")
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = None
            if response.is_success:
                return ToolResult(ok=False, status=response.status_code,
                                  error="response is not JSON")
        if not response.is_success:
            return ToolResult(ok=False, status=response.status_code, data=data,
                              error=f"HTTP {response.status_code}")
        return ToolResult(ok=True, status=response.status_code, data=data)
