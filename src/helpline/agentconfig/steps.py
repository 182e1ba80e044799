"""The built-in engine's procedure steps: say, ask, call, branch, handoff, resolve, end.

In YAML a step is a mapping with exactly one of those keys; ``handoff``, ``resolve`` and
``end`` may also be written as a bare word (``- resolve``). See docs/config-reference.md.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    Tag,
    model_serializer,
    model_validator,
)

from helpline.agentconfig.templates import VAR_PATH_RE

STEP_KINDS = ("say", "ask", "call", "branch", "handoff", "resolve", "end")
RESERVED_NAMES = frozenset({"metadata", "error"})
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_PATTERN_LENGTH = 500


class StrictModel(BaseModel):
    """Base for config models: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_name(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            "must start with a lowercase letter and contain only a-z, 0-9 and _ (max 64)"
        )
    return value


def _check_variable(value: str) -> str:
    _check_name(value)
    if value in RESERVED_NAMES:
        raise ValueError(f"'{value}' is reserved")
    return value


def _check_path(value: str) -> str:
    if not VAR_PATH_RE.match(value):
        raise ValueError("must be a variable name or a dotted path such as order.status")
    return value


def compile_pattern(value: str) -> str:
    """Check that a regular expression compiles (and is not absurdly long)."""
    if len(value) > MAX_PATTERN_LENGTH:
        raise ValueError(f"regular expression longer than {MAX_PATTERN_LENGTH} characters")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None
    return value


Name = Annotated[str, AfterValidator(_check_name)]
Variable = Annotated[str, AfterValidator(_check_variable)]
VarPath = Annotated[str, AfterValidator(_check_path)]
Pattern = Annotated[str, AfterValidator(compile_pattern)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=4000)]


class SayStep(StrictModel):
    """Send a message to the user."""

    kind: ClassVar[str] = "say"
    say: Text


class AskSpec(StrictModel):
    """Ask the user for a value and wait for the answer."""

    slot: Variable
    prompt: Text
    pattern: Pattern | None = None
    retry: Text | None = None
    max_attempts: int = Field(default=3, ge=1, le=10)
    prefill: bool = False


class AskStep(StrictModel):
    kind: ClassVar[str] = "ask"
    ask: AskSpec


class CallSpec(StrictModel):
    """Call an HTTP tool and keep its JSON result."""

    tool: Name
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    save_as: Variable | None = None
    on_error: list[Step] | None = Field(default=None, min_length=1)

    @property
    def result_name(self) -> str:
        """The variable the result is stored under (``save_as``, else the tool's name)."""
        return self.save_as or self.tool


class CallStep(StrictModel):
    kind: ClassVar[str] = "call"
    call: CallSpec


OPERATORS = ("equals", "in", "matches", "exists")


class Condition(StrictModel):
    """One test on a variable: exactly one of equals / in / matches / exists."""

    var: VarPath
    equals: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    matches: Pattern | None = None
    exists: bool | None = None

    @model_validator(mode="after")
    def _one_operator(self) -> Condition:
        fields = ("equals", "in_", "matches", "exists")
        used = [name for name in fields if name in self.model_fields_set]
        if len(used) != 1:
            raise ValueError("a condition needs exactly one of: equals, in, matches, exists")
        return self

    @property
    def operator(self) -> Literal["equals", "in", "matches", "exists"]:
        """The operator this condition uses."""
        if "equals" in self.model_fields_set:
            return "equals"
        if "matches" in self.model_fields_set:
            return "matches"
        if "exists" in self.model_fields_set:
            return "exists"
        return "in"

    @model_serializer(mode="wrap")
    def _only_used_operator(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # `equals: null` is meaningful, so unused operators are dropped rather than dumped as null.
        data: dict[str, Any] = handler(self)
        keep = {"var", self.operator, "in_" if self.operator == "in" else self.operator}
        return {key: value for key, value in data.items() if key in keep}


class BranchCase(StrictModel):
    when: Condition
    then: list[Step] = Field(min_length=1)


class BranchSpec(StrictModel):
    """Run the steps of the first case whose condition holds, else the ``else`` steps."""

    if_: list[BranchCase] = Field(alias="if", min_length=1)
    else_: list[Step] | None = Field(default=None, alias="else", min_length=1)


class BranchStep(StrictModel):
    kind: ClassVar[str] = "branch"
    branch: BranchSpec


def _bare_word(kind: str, value: Any) -> Any:
    return {kind: None} if value == kind else value


class HandoffStep(StrictModel):
    """Hand the conversation to a human; ends the procedure."""

    kind: ClassVar[str] = "handoff"
    handoff: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        return _bare_word("handoff", value)


class ResolveStep(StrictModel):
    """Mark the conversation resolved; ends the procedure."""

    kind: ClassVar[str] = "resolve"
    resolve: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        return _bare_word("resolve", value)


class EndStep(StrictModel):
    """Stop the procedure quietly (optionally saying something); the conversation goes on."""

    kind: ClassVar[str] = "end"
    end: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        return _bare_word("end", value)


def step_kind(value: Any) -> str | None:
    """Which step a YAML value is: the one step key it has (``None`` when ambiguous)."""
    if isinstance(value, StrictModel):
        return getattr(value, "kind", None)
    if isinstance(value, str) and value in ("handoff", "resolve", "end"):
        return value
    if isinstance(value, dict):
        kinds = [key for key in value if key in STEP_KINDS]
        if len(kinds) == 1:
            return kinds[0]
    return None


Step = Annotated[
    Annotated[SayStep, Tag("say")]
    | Annotated[AskStep, Tag("ask")]
    | Annotated[CallStep, Tag("call")]
    | Annotated[BranchStep, Tag("branch")]
    | Annotated[HandoffStep, Tag("handoff")]
    | Annotated[ResolveStep, Tag("resolve")]
    | Annotated[EndStep, Tag("end")],
    Discriminator(
        step_kind,
        custom_error_type="invalid_step",
        custom_error_message=(
            "a step is a mapping with exactly one of the keys: " + ", ".join(STEP_KINDS)
        ),
    ),
]

AnyStep = SayStep | AskStep | CallStep | BranchStep | HandoffStep | ResolveStep | EndStep
ENDING_STEPS = (HandoffStep, ResolveStep, EndStep)

CallSpec.model_rebuild()
BranchCase.model_rebuild()
BranchSpec.model_rebuild()
