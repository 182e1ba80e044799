"""The agent repository's files as validated models, and loading a whole repository.

Layout (reference: docs/config-reference.md):

    agent.yaml              AgentSpec
    procedures/<name>.yaml  Procedure
    tools/<name>.yaml       Tool
    tags.yaml               list of TagDef
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, ValidationError

from helpline.agentconfig.steps import Name, Step, StrictModel
from helpline.agentconfig.templates import PLACEHOLDER_RE
from helpline.agentconfig.validate import (
    ConfigError,
    check_procedure,
    check_tags,
    check_tool,
    classify_path,
    parse_yaml,
    pydantic_errors,
)

__all__ = [
    "AgentConfig",
    "AgentSpec",
    "ConfigError",
    "HandoffSpec",
    "KnowledgeSpec",
    "LlmSpec",
    "Procedure",
    "TagDef",
    "Tool",
    "config_from_snapshot",
    "config_to_snapshot",
    "load_config",
]

SNAPSHOT_VERSION = 1
DEFAULT_FALLBACK = (
    "Sorry, I'm not sure I understood. Could you rephrase that? "
    "You can also ask to talk to a person."
)
DEFAULT_HANDOFF = "I'm passing you to a member of our team. They'll reply here as soon as they can."
DEFAULT_ERROR = "Sorry, something went wrong on our side."
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
INPUT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

Message = Annotated[str, StringConstraints(min_length=1, max_length=4000)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=200)]


def _check_http_url(value: str) -> str:
    if len(value) > 2000:
        raise ValueError("URL longer than 2000 characters")
    parts = urlsplit(PLACEHOLDER_RE.sub("x", value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    return value


HttpUrlText = Annotated[str, AfterValidator(_check_http_url)]


class LlmSpec(StrictModel):
    """Model settings for the ``llm`` engine; unset model = the server's default model."""

    model: ShortText | None = None
    temperature: float = Field(default=0.2, ge=0, le=2)


class HandoffSpec(StrictModel):
    """Where handed-off conversations go."""

    destination: ShortText = "AGENT"
    webhook_url: HttpUrlText | None = None
    after_fallbacks: int = Field(default=2, ge=0, le=10)


class KnowledgeSpec(StrictModel):
    """Knowledge-base answers (built-in engine: best passage; llm engine: a search tool)."""

    enabled: bool = True
    min_score: float | None = Field(default=None, ge=0)


class AgentSpec(StrictModel):
    """agent.yaml: the agent's identity, engine and canned messages."""

    name: ShortText
    instructions: str = Field(default="", max_length=20000)
    engine: Literal["builtin", "llm"] = "builtin"
    llm: LlmSpec = Field(default_factory=LlmSpec)
    greeting: Message | None = None
    fallback_message: Message = DEFAULT_FALLBACK
    handoff_message: Message = DEFAULT_HANDOFF
    error_message: Message = DEFAULT_ERROR
    handoff: HandoffSpec = Field(default_factory=HandoffSpec)
    knowledge: KnowledgeSpec = Field(default_factory=KnowledgeSpec)


Trigger = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


class Procedure(StrictModel):
    """procedures/<name>.yaml: one agent operating procedure."""

    description: str = Field(default="", max_length=1000)
    triggers: list[Trigger] = Field(min_length=1, max_length=100)
    instructions: str = Field(default="", max_length=20000)
    steps: list[Step] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list, max_length=50)


def _check_header_names(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        if not HEADER_NAME_RE.match(name):
            raise ValueError(f"invalid header name {name!r}")
    return value


def _check_input_schema(value: dict[str, Any]) -> dict[str, Any]:
    if value.get("type") != "object":
        raise ValueError("must be a JSON schema with type: object")
    properties = value.get("properties", {})
    if not isinstance(properties, dict):
        raise ValueError("properties must be a mapping of input name to JSON schema")
    for name, schema in properties.items():
        if not INPUT_NAME_RE.match(str(name)):
            raise ValueError(f"invalid input name {name!r} (letters, digits and _)")
        if not isinstance(schema, dict):
            raise ValueError(f"properties.{name} must be a JSON schema mapping")
    required = value.get("required", [])
    if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
        raise ValueError("required must be a list of input names")
    for name in required:
        if name not in properties:
            raise ValueError(f"required input {name!r} is not in properties")
    return value


def _empty_input_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class Tool(StrictModel):
    """tools/<name>.yaml: an HTTP endpoint the agent can call."""

    description: str = Field(default="", max_length=1000)
    method: Annotated[
        Literal["GET", "POST", "PUT", "PATCH", "DELETE"],
        BeforeValidator(lambda value: value.upper() if isinstance(value, str) else value),
    ]
    url: HttpUrlText
    headers: Annotated[dict[str, str], AfterValidator(_check_header_names)] = Field(
        default_factory=dict
    )
    input: Annotated[dict[str, Any], AfterValidator(_check_input_schema)] = Field(
        default_factory=_empty_input_schema
    )
    timeout: float = Field(default=5, gt=0, le=30)

    @property
    def input_properties(self) -> dict[str, Any]:
        """The input names and their JSON schemas."""
        properties: dict[str, Any] = self.input.get("properties", {})
        return properties

    @property
    def required_inputs(self) -> list[str]:
        """Inputs a call must provide."""
        required: list[str] = self.input.get("required", [])
        return required


class TagDef(StrictModel):
    """One entry of tags.yaml; a tag below level 1 names its parent (one level up)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^\S(.*\S)?$")]
    level: int = Field(ge=1, le=10)
    parent: str | None = None
    description: str = Field(default="", max_length=1000)


class AgentConfig(StrictModel):
    """A whole validated agent repository."""

    agent: AgentSpec
    procedures: dict[Name, Procedure] = Field(default_factory=dict)
    tools: dict[Name, Tool] = Field(default_factory=dict)
    tags: list[TagDef] = Field(default_factory=list)


_MODELS: dict[str, type[StrictModel]] = {
    "agent": AgentSpec,
    "procedure": Procedure,
    "tool": Tool,
    "tag": TagDef,
}


def load_config(files: Mapping[str, bytes | str]) -> tuple[AgentConfig | None, list[ConfigError]]:
    """Validate a repository (path -> content); the config, or None and every error found."""
    errors: list[ConfigError] = []
    agent: AgentSpec | None = None
    procedures: dict[str, Procedure] = {}
    tools: dict[str, Tool] = {}
    tags: list[TagDef] | None = None
    # Names of files that exist but failed to validate: still "known", so references to
    # them do not add a second, misleading "unknown tool" error.
    tool_names: set[str] = set()
    tag_names: set[str] | None = None

    for path in sorted(files):
        kind, name, layout_error = classify_path(path)
        if layout_error:
            errors.append(layout_error)
        if kind is None:
            continue
        if kind == "tool":
            tool_names.add(name)
        data, parse_error = parse_yaml(path, files[path], expect_list=kind == "tags")
        if parse_error:
            errors.append(parse_error)
            if kind == "tags":
                tag_names = None
            continue
        if kind == "tags":
            tags, tag_errors = _load_tags(path, data)
            errors.extend(tag_errors)
            tag_names = {
                str(item["name"]) for item in data if isinstance(item, dict) and "name" in item
            }
            continue
        try:
            model = _MODELS[kind].model_validate({} if data is None else data)
        except ValidationError as exc:
            errors.extend(pydantic_errors(path, exc))
            continue
        if isinstance(model, AgentSpec):
            agent = model
        elif isinstance(model, Procedure):
            procedures[name] = model
        elif isinstance(model, Tool):
            tools[name] = model

    if "agent.yaml" not in files:
        errors.append(ConfigError("agent.yaml", "", "missing: every agent repository needs one"))
    if "tags.yaml" not in files:
        tag_names, tags = set(), []
    for name, tool in sorted(tools.items()):
        errors.extend(check_tool(f"tools/{name}.yaml", tool))
    for name, procedure in sorted(procedures.items()):
        errors.extend(
            check_procedure(
                f"procedures/{name}.yaml",
                procedure,
                engine=agent.engine if agent else None,
                tools=tools,
                tool_names=tool_names,
                tag_names=tag_names,
            )
        )
    if errors or agent is None or tags is None:
        errors.sort(key=lambda error: error.file)  # stable: keeps each file's own order
        return None, errors
    return AgentConfig(agent=agent, procedures=procedures, tools=tools, tags=tags), []


def _load_tags(path: str, data: Any) -> tuple[list[TagDef] | None, list[ConfigError]]:
    errors: list[ConfigError] = []
    tags: list[TagDef] = []
    for index, item in enumerate(data):
        try:
            tags.append(TagDef.model_validate(item))
        except ValidationError as exc:
            errors.extend(pydantic_errors(path, exc, prefix=f"[{index}]"))
    if errors:
        return None, errors
    errors = check_tags(path, tags)
    return (None if errors else tags), errors


def config_to_snapshot(config: AgentConfig) -> dict[str, Any]:
    """A JSON-serialisable, self-contained copy of a config (stored with a published version)."""
    data: dict[str, Any] = config.model_dump(mode="json", by_alias=True)
    return {"snapshot_version": SNAPSHOT_VERSION, **data}


def config_from_snapshot(data: Mapping[str, Any]) -> AgentConfig:
    """Rebuild a config from ``config_to_snapshot`` output."""
    body = dict(data)
    version = body.pop("snapshot_version", None)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unsupported agent config snapshot version: {version!r}")
    return AgentConfig.model_validate(body)
