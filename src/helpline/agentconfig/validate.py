"""Validation of an agent repository beyond single-field checks: layout, YAML, cross-file rules.

Every problem becomes a ``ConfigError(file, field, message)``; ``field`` is a path such as
``steps[2].call.tool`` (empty when the whole file is concerned).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from helpline.agentconfig.steps import (
    ENDING_STEPS,
    NAME_RE,
    STEP_KINDS,
    AnyStep,
    AskStep,
    BranchStep,
    CallStep,
    EndStep,
    HandoffStep,
    ResolveStep,
    SayStep,
)
from helpline.agentconfig.templates import USER_TOKEN, root_name, template_refs

if TYPE_CHECKING:
    from helpline.agentconfig.schema import Procedure, TagDef, Tool

MAX_FILE_BYTES = 256 * 1024
MAX_STEPS = 200
MAX_DEPTH = 5
PREDEFINED = frozenset({"metadata"})
IGNORED_NAME_RE = re.compile(r"^(readme|license|licence|changelog|notice)([.\-_].*)?$", re.I)
LAYOUT_HELP = (
    "an agent repository holds agent.yaml, tags.yaml, procedures/<name>.yaml and "
    "tools/<name>.yaml (README*, LICENSE*, *.md and dotfiles are ignored)"
)
_MESSAGES = {"extra_forbidden": "unknown key", "missing": "required"}


@dataclass(frozen=True)
class ConfigError:
    """One validation problem; ``field`` is "" when the whole file is concerned."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


def classify_path(path: str) -> tuple[str | None, str, ConfigError | None]:
    """Which kind of file a repository path is: (kind or None, name, layout error or None)."""
    parts = path.split("/")
    base = parts[-1]
    if any(part.startswith(".") for part in parts) or IGNORED_NAME_RE.match(base):
        return None, "", None
    if base.lower().endswith(".md"):
        return None, "", None
    if path in ("agent.yaml", "tags.yaml"):
        return ("agent" if path == "agent.yaml" else "tags"), path[:-5], None
    if len(parts) == 2 and parts[0] in ("procedures", "tools"):
        kind = "procedure" if parts[0] == "procedures" else "tool"
        stem, dot, ext = base.rpartition(".")
        if dot and ext == "yml":
            hint = f"use the .yaml extension: {parts[0]}/{stem}.yaml"
            return None, "", ConfigError(path, "", hint)
        if not dot or ext != "yaml":
            return None, "", ConfigError(path, "", f"unexpected file; {LAYOUT_HELP}")
        if not NAME_RE.match(stem):
            return (
                None,
                "",
                ConfigError(
                    path,
                    "",
                    "file name must start with a lowercase letter and use only a-z, 0-9 and _",
                ),
            )
        return kind, stem, None
    if path in ("agent.yml", "tags.yml"):
        return None, "", ConfigError(path, "", f"use the .yaml extension: {path[:-4]}.yaml")
    return None, "", ConfigError(path, "", f"unexpected file; {LAYOUT_HELP}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of silently keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                continue  # unhashable keys are reported by the base class
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Dates stay text: every value must survive a JSON round trip (snapshots, tool inputs).
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _non_json_value(data: Any, path: str = "") -> str | None:
    """The path of the first value JSON cannot represent (binary, sets, NaN...), if any."""
    if isinstance(data, dict):
        for key, value in data.items():
            found = _non_json_value(value, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(data, list):
        for index, value in enumerate(data):
            found = _non_json_value(value, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    if data is None or isinstance(data, str | int | float | bool):
        return None
    return path or "(top level)"


def parse_yaml(
    path: str, content: bytes | str, *, expect_list: bool
) -> tuple[Any, ConfigError | None]:
    """Decode and parse one YAML file; a list file's empty body is ``[]``."""
    if isinstance(content, bytes):
        if len(content) > MAX_FILE_BYTES:
            return None, ConfigError(path, "", f"file larger than {MAX_FILE_BYTES // 1024} KiB")
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None, ConfigError(path, "", "not UTF-8 text")
    elif len(content.encode()) > MAX_FILE_BYTES:
        return None, ConfigError(path, "", f"file larger than {MAX_FILE_BYTES // 1024} KiB")
    try:
        data = yaml.load(content, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        return None, ConfigError(path, "", _yaml_message(exc))
    bad = _non_json_value(data)
    if bad is not None:
        return None, ConfigError(
            path,
            bad,
            "unsupported YAML value (only text, numbers, booleans, null, lists and mappings)",
        )
    if expect_list:
        if data is None:
            return [], None
        if not isinstance(data, list):
            message = "must be a YAML list (one '- name: ...' entry per tag)"
            return None, ConfigError(path, "", message)
    elif data is not None and not isinstance(data, dict):
        return None, ConfigError(path, "", "must be a YAML mapping (key: value lines)")
    return data, None


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f"invalid YAML: {problem}"


def format_loc(loc: Iterable[int | str], prefix: str = "") -> str:
    """Turn a pydantic error location into ``steps[2].call.tool``."""
    items = list(loc)
    text = prefix
    for index, item in enumerate(items):
        # A tagged union adds its tag to the location; the tag equals the step's key.
        if item in STEP_KINDS and index + 1 < len(items) and items[index + 1] == item:
            continue
        if isinstance(item, int):
            text += f"[{item}]"
        else:
            text += f".{item}" if text else str(item)
    return text


def pydantic_errors(path: str, exc: ValidationError, prefix: str = "") -> list[ConfigError]:
    """Convert a pydantic ValidationError into ConfigErrors for one file."""
    errors: list[ConfigError] = []
    for error in exc.errors(include_url=False):
        message = _MESSAGES.get(error["type"], error["msg"])
        for noise in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(noise)
        item = ConfigError(path, format_loc(error["loc"], prefix), message)
        if item not in errors:
            errors.append(item)
    return errors


def check_tags(path: str, tags: list[TagDef]) -> list[ConfigError]:
    """The taxonomy rules: unique names; a level-n tag (n > 1) has a level-(n-1) parent."""
    errors: list[ConfigError] = []
    levels: dict[str, int] = {}
    for index, tag in enumerate(tags):
        if tag.name in levels:
            errors.append(ConfigError(path, f"[{index}].name", f"duplicate tag {tag.name!r}"))
        levels.setdefault(tag.name, tag.level)
    for index, tag in enumerate(tags):
        field = f"[{index}].parent"
        if tag.level == 1:
            if tag.parent is not None:
                errors.append(ConfigError(path, field, "a level-1 tag has no parent"))
        elif tag.parent is None:
            errors.append(ConfigError(path, field, f"required for a level-{tag.level} tag"))
        elif tag.parent not in levels:
            errors.append(ConfigError(path, field, f"unknown tag {tag.parent!r}"))
        elif levels[tag.parent] != tag.level - 1:
            errors.append(
                ConfigError(
                    path,
                    field,
                    f"parent {tag.parent!r} has level {levels[tag.parent]}; "
                    f"a level-{tag.level} tag needs a level-{tag.level - 1} parent",
                )
            )
    return errors


def check_tool(path: str, tool: Tool) -> list[ConfigError]:
    """Placeholders in a tool's url and headers must be its inputs or ``{{user_token}}``."""
    errors: list[ConfigError] = []
    templates = [("url", tool.url)]
    templates += [(f"headers.{name}", value) for name, value in tool.headers.items()]
    for field, template in templates:
        refs = template_refs(template)
        for secret in refs.secrets:
            if secret != USER_TOKEN:
                message = f"unknown placeholder {{{{{secret}}}}}: only {{{{user_token}}}} exists"
                errors.append(ConfigError(path, field, message))
        for ref in refs.variables:
            if "." in ref or ref not in tool.input_properties:
                message = f"placeholder {{{ref}}} is not an input of this tool (input.properties)"
                errors.append(ConfigError(path, field, message))
    return errors


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_procedure(
    path: str,
    procedure: Procedure,
    *,
    engine: str | None,
    tools: Mapping[str, Tool],
    tool_names: set[str],
    tag_names: set[str] | None,
) -> list[ConfigError]:
    """Cross-file rules for one procedure: tools, tags, variables, reachability, size."""
    errors: list[ConfigError] = []
    if tag_names is not None:
        for index, tag in enumerate(procedure.tags):
            if tag not in tag_names:
                message = f"unknown tag {tag!r} (not in tags.yaml)" + _suggest(tag, tag_names)
                errors.append(ConfigError(path, f"tags[{index}]", message))
    if engine == "builtin" and not procedure.steps:
        message = "required: the builtin engine runs a procedure's steps"
        errors.append(ConfigError(path, "steps", message))
    if engine == "llm" and not procedure.instructions.strip():
        message = "required: the llm engine follows a procedure's instructions"
        errors.append(ConfigError(path, "instructions", message))
    walker = _StepWalker(path, tools, tool_names)
    walker.walk(procedure.steps, "steps", set(PREDEFINED), depth=1)
    if walker.count > MAX_STEPS:
        errors.append(ConfigError(path, "steps", f"more than {MAX_STEPS} steps ({walker.count})"))
    return errors + walker.errors


class _StepWalker:
    """Walks steps in document order, tracking which variables are set by earlier steps."""

    def __init__(self, path: str, tools: Mapping[str, Tool], tool_names: set[str]) -> None:
        self.path = path
        self.tools = tools
        self.tool_names = tool_names
        self.errors: list[ConfigError] = []
        self.count = 0

    def error(self, field: str, message: str) -> None:
        self.errors.append(ConfigError(self.path, field, message))

    def walk(self, steps: list[AnyStep], prefix: str, defined: set[str], depth: int) -> None:
        if depth > MAX_DEPTH:
            self.error(prefix, f"steps nested deeper than {MAX_DEPTH} levels")
            return
        for index, step in enumerate(steps):
            here = f"{prefix}[{index}]"
            self.count += 1
            if index > 0 and isinstance(steps[index - 1], ENDING_STEPS):
                ender = steps[index - 1].kind
                self.error(here, f"never runs: the previous step ({ender}) ends the procedure")
            self.step(step, here, defined, depth)

    def step(self, step: AnyStep, here: str, defined: set[str], depth: int) -> None:
        if isinstance(step, SayStep):
            self.text(f"{here}.say", step.say, defined)
        elif isinstance(step, HandoffStep) and step.handoff:
            self.text(f"{here}.handoff", step.handoff, defined)
        elif isinstance(step, ResolveStep) and step.resolve:
            self.text(f"{here}.resolve", step.resolve, defined)
        elif isinstance(step, EndStep) and step.end:
            self.text(f"{here}.end", step.end, defined)
        elif isinstance(step, AskStep):
            self.text(f"{here}.ask.prompt", step.ask.prompt, defined)
            if step.ask.retry:
                self.text(f"{here}.ask.retry", step.ask.retry, defined)
            defined.add(step.ask.slot)
        elif isinstance(step, CallStep):
            self.call(step, f"{here}.call", defined, depth)
        elif isinstance(step, BranchStep):
            self.branch(step, f"{here}.branch", defined, depth)

    def call(self, step: CallStep, here: str, defined: set[str], depth: int) -> None:
        spec = step.call
        if spec.tool not in self.tool_names:
            hint = _suggest(spec.tool, self.tool_names)
            self.error(f"{here}.tool", f"unknown tool {spec.tool!r}{hint}")
        tool = self.tools.get(spec.tool)
        if tool is not None:
            open_schema = tool.input.get("additionalProperties") is True
            for key in spec.with_:
                if key not in tool.input_properties and not open_schema:
                    message = f"{key!r} is not an input of tool {spec.tool!r}"
                    self.error(f"{here}.with.{key}", message)
            for required in tool.required_inputs:
                if required not in spec.with_:
                    message = f"missing required input {required!r} of tool {spec.tool!r}"
                    self.error(f"{here}.with", message)
        for key, value in spec.with_.items():
            self.value(f"{here}.with.{key}", value, defined)
        if spec.on_error:
            # `error` exists only inside on_error (unless an outer on_error already set it).
            inner = defined | {"error"}
            self.walk(spec.on_error, f"{here}.on_error", inner, depth + 1)
            if "error" not in defined:
                inner.discard("error")
            defined |= inner
        defined.add(spec.result_name)

    def branch(self, step: BranchStep, here: str, defined: set[str], depth: int) -> None:
        added: set[str] = set()
        for index, case in enumerate(step.branch.if_):
            root = root_name(case.when.var)
            if root not in defined:
                self.error(f"{here}.if[{index}].when.var", self._unset(case.when.var))
            inner = set(defined)
            self.walk(case.then, f"{here}.if[{index}].then", inner, depth + 1)
            added |= inner
        if step.branch.else_:
            inner = set(defined)
            self.walk(step.branch.else_, f"{here}.else", inner, depth + 1)
            added |= inner
        defined |= added

    def value(self, field: str, value: Any, defined: set[str]) -> None:
        if isinstance(value, str):
            self.text(field, value, defined)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.value(f"{field}[{index}]", item, defined)
        elif isinstance(value, dict):
            for key, item in value.items():
                self.value(f"{field}.{key}", item, defined)

    def text(self, field: str, template: str, defined: set[str]) -> None:
        refs = template_refs(template)
        for secret in refs.secrets:
            self.error(field, f"{{{{{secret}}}}} is only available in a tool's url and headers")
        for ref in refs.variables:
            if root_name(ref) not in defined:
                self.error(field, self._unset(ref))

    @staticmethod
    def _unset(ref: str) -> str:
        return (
            f"uses {ref!r} before any earlier step sets {root_name(ref)!r} "
            "(an ask slot or a call's save_as)"
        )
