"""Placeholder templates shared by validation, the step runner and the HTTP tool caller.

Two placeholder forms exist:

* ``{name}`` / ``{name.field.0.sub}``: a procedure variable (an ``ask`` slot, a ``call``
  result, ``metadata``, ``error``) or, in a tool's url/headers, one of the tool's inputs.
* ``{{user_token}}``: the end user's token; only in a tool's url and headers, never in text
  shown to the user.

Anything else in braces (``{ }``, ``{"a": 1}``) is literal text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from helpline.agentconfig.schema import Tool

PATH_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"
PLACEHOLDER_RE = re.compile(
    r"\{\{\s*(?P<secret>[A-Za-z_][A-Za-z0-9_]*)\s*\}\}"  # {{user_token}}
    r"|\{(?P<var>" + PATH_PATTERN + r")\}"  # {order.status}
)
VAR_PATH_RE = re.compile(r"^" + PATH_PATTERN + r"$")
USER_TOKEN = "user_token"  # noqa: S105 - a placeholder name, not a credential
MISSING = object()


@dataclass(frozen=True)
class TemplateRefs:
    """The placeholders found in one template string."""

    variables: tuple[str, ...]  # full dotted paths, in order of appearance
    secrets: tuple[str, ...]  # names used as {{name}}


@dataclass(frozen=True)
class ToolRequest:
    """A fully rendered HTTP request for a tool call."""

    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, Any] = field(default_factory=dict)  # query string (GET, DELETE)
    json_body: dict[str, Any] | None = None  # JSON body (POST, PUT, PATCH)


def template_refs(template: str) -> TemplateRefs:
    """List the variable paths and ``{{secret}}`` names used in a template."""
    variables: list[str] = []
    secrets: list[str] = []
    for match in PLACEHOLDER_RE.finditer(template):
        if match.group("secret") is not None:
            secrets.append(match.group("secret"))
        else:
            variables.append(match.group("var"))
    return TemplateRefs(tuple(variables), tuple(secrets))


def root_name(path: str) -> str:
    """The variable a dotted path starts from (``order`` for ``order.status``)."""
    return path.split(".", 1)[0]


def lookup(variables: Mapping[str, Any], path: str) -> Any:
    """Resolve a dotted path in nested dicts/lists; ``MISSING`` when any segment is absent."""
    current: Any = variables
    for segment in path.split("."):
        if isinstance(current, Mapping):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def format_value(value: Any) -> str:
    """Render a JSON value as text for a message: scalars plainly, lists joined, objects as JSON."""
    if value is None or value is MISSING:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(
        isinstance(item, str | int | float) and not isinstance(item, bool) for item in value
    ):
        return ", ".join(str(item) for item in value)
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)


def render_text(template: str, variables: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Interpolate ``{path}`` placeholders; missing ones become "" and are returned by path.

    ``{{...}}`` placeholders are removed: secrets never reach text shown to a user.
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        path = match.group("var")
        if path is None:
            return ""
        value = lookup(variables, path)
        if value is MISSING or value is None:
            missing.append(path)
        return format_value(value)

    return PLACEHOLDER_RE.sub(replace, template), missing


def render_value(value: Any, variables: Mapping[str, Any]) -> Any:
    """Render a tool input: a string that is exactly one placeholder keeps the value's JSON type."""
    if isinstance(value, str):
        whole = PLACEHOLDER_RE.fullmatch(value)
        if whole is not None and whole.group("var") is not None:
            found = lookup(variables, whole.group("var"))
            return None if found is MISSING else found
        return render_text(value, variables)[0]
    if isinstance(value, list):
        return [render_value(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: render_value(item, variables) for key, item in value.items()}
    return value


def _fill(template: str, inputs: Mapping[str, Any], user_token: str | None, *, url: bool) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group("secret") is not None:
            text = user_token or ""
        else:
            value = lookup(inputs, match.group("var"))
            text = json.dumps(value) if isinstance(value, bool) else format_value(value)
        return quote(text, safe="") if url else text

    return PLACEHOLDER_RE.sub(replace, template)


def render_tool_request(
    tool: Tool, inputs: Mapping[str, Any], user_token: str | None
) -> ToolRequest:
    """Build the HTTP request for a tool call (see docs/config-reference.md, "tools")."""
    url_refs = template_refs(tool.url)
    used = {root_name(path) for path in url_refs.variables}
    url = _fill(tool.url, inputs, user_token, url=True)
    headers: dict[str, str] = {}
    for name, value in tool.headers.items():
        if USER_TOKEN in template_refs(value).secrets and not user_token:
            continue  # no token: leave the header out rather than send "Bearer "
        headers[name] = _fill(value, inputs, user_token, url=False)
    rest = {key: value for key, value in inputs.items() if key not in used}
    if tool.method in ("GET", "DELETE"):
        params = {key: value for key, value in rest.items() if value is not None}
        return ToolRequest(tool.method, url, headers, params=params)
    return ToolRequest(tool.method, url, headers, json_body=rest)
