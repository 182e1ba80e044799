"""The built-in engine's step runner: pure and deterministic, no database and no HTTP.

A procedure runs until it needs an answer from the user (an ``ask`` step) or ends (end of
its steps, ``handoff``, ``resolve``, ``end``). Between turns its position and variables
live in a JSON-serialisable ``ProcedureState`` that the engine stores on the conversation.
Tool calls go through an injected ``call_tool`` so the runner can be tested with a fake.
Step semantics are documented in docs/config-reference.md.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from helpline.agentconfig.schema import AgentConfig, Tool
from helpline.agentconfig.steps import (
    AnyStep,
    AskSpec,
    AskStep,
    BranchStep,
    CallStep,
    Condition,
    EndStep,
    HandoffStep,
    ResolveStep,
    SayStep,
)
from helpline.agentconfig.templates import MISSING, lookup, render_text, render_value

logger = logging.getLogger(__name__)

# Validated procedures cannot loop and hold at most 200 steps, so this budget only trips on
# a corrupt state or snapshot; it still bounds the work one user message can cause.
MAX_STEPS_PER_TURN = 250
# Patterns are matched against at most this much of an answer (bounds regex cost).
MAX_ANSWER_CHARS = 2000

EventKind = Literal["say", "ask", "tool_call", "handoff", "resolve"]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned: ``ok`` is False on timeout, non-2xx status or bad JSON."""

    ok: bool
    status: int | None = None
    data: Any = None
    error: str | None = None


ToolCaller = Callable[[Tool, dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True)
class StepEvent:
    """Something the procedure did this turn: a message to send, a tool call to audit, an end."""

    kind: EventKind
    text: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProcedureState:
    """Where a paused procedure is: ``pc`` = [index, (case, index)*] into nested step lists."""

    procedure: str
    pc: list[int]
    vars: dict[str, Any] = field(default_factory=dict)
    waiting_for: str | None = None
    attempts: int = 0
    trigger: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON data."""
        return {
            "procedure": self.procedure,
            "pc": list(self.pc),
            "vars": copy.deepcopy(self.vars),
            "waiting_for": self.waiting_for,
            "attempts": self.attempts,
            "trigger": self.trigger,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcedureState:
        """Rebuild a state from ``to_dict`` output; ValueError when it is malformed."""
        try:
            state = cls(
                procedure=data["procedure"],
                pc=list(data["pc"]),
                vars=copy.deepcopy(dict(data.get("vars") or {})),
                waiting_for=data.get("waiting_for"),
                attempts=data.get("attempts", 0),
                trigger=data.get("trigger"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed procedure state: {exc}") from None
        if (
            not isinstance(state.procedure, str)
            or not state.pc
            or len(state.pc) % 2 != 1
            or not all(isinstance(item, int) and item >= 0 for item in state.pc)
            or not isinstance(state.attempts, int)
            or not isinstance(state.waiting_for, str | None)
            or not isinstance(state.trigger, str | None)
        ):
            raise ValueError("malformed procedure state")
        return state


class _InvalidState(Exception):
    """The state does not fit the procedure (e.g. a snapshot it was not made from)."""


async def start_procedure(
    config: AgentConfig,
    name: str,
    *,
    call_tool: ToolCaller,
    user_text: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    max_steps: int = MAX_STEPS_PER_TURN,
) -> tuple[ProcedureState | None, list[StepEvent]]:
    """Run a procedure from its first step; the state is None once it has finished."""
    if name not in config.procedures:
        raise KeyError(f"unknown procedure {name!r}")
    state = ProcedureState(
        procedure=name,
        pc=[0],
        vars={"metadata": copy.deepcopy(dict(metadata or {}))},
        trigger=user_text,
    )
    run = _Run(config, state, call_tool, max_steps)
    return await run.run(), run.events


async def continue_procedure(
    config: AgentConfig,
    state: ProcedureState,
    user_text: str,
    *,
    call_tool: ToolCaller,
    max_steps: int = MAX_STEPS_PER_TURN,
) -> tuple[ProcedureState | None, list[StepEvent]]:
    """Feed the user's answer to the waiting ``ask`` step and run on; None once finished."""
    state = ProcedureState.from_dict(state.to_dict())  # never mutate the caller's copy
    run = _Run(config, state, call_tool, max_steps)
    try:
        step = run.current()
        if not isinstance(step, AskStep) or step.ask.slot != state.waiting_for:
            raise _InvalidState
    except _InvalidState:
        run.handoff(None, reason="invalid_state")
        return None, run.events
    return await run.answer(step.ask, user_text), run.events


def match_answer(ask: AskSpec, text: str) -> str | None:
    """The value an answer gives an ``ask`` slot: first captured group, else the whole match."""
    text = text.strip()[:MAX_ANSWER_CHARS]
    if not text:
        return None
    if ask.pattern is None:
        return text
    found = re.search(ask.pattern, text)
    if found is None:
        return None
    groups = [group for group in found.groups() if group is not None]
    return (groups[0] if groups else found.group(0)).strip()


def condition_holds(condition: Condition, variables: Mapping[str, Any]) -> bool:
    """Evaluate one branch condition against the procedure's variables."""
    value = lookup(variables, condition.var)
    operator = condition.operator
    if operator == "exists":
        return (value is not MISSING and value is not None) == condition.exists
    if value is MISSING:
        return False
    if operator == "equals":
        return _same(value, condition.equals)
    if operator == "in":
        return any(_same(value, item) for item in condition.in_ or [])
    if value is None or condition.matches is None:
        return False
    return re.search(condition.matches, _as_text(value)[:MAX_ANSWER_CHARS]) is not None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if _is_number(value):
        return str(value)
    return json.dumps(value, sort_keys=True)


def _same(left: Any, right: Any) -> bool:
    # YAML `equals: 404` must match a status given as "404", and vice versa.
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    scalars = (str, int, float, bool, type(None))
    if isinstance(left, scalars) and isinstance(right, scalars):
        return _as_text(left) == _as_text(right)
    return bool(left == right)


class _Run:
    """One turn of one procedure: executes steps and collects events."""

    def __init__(
        self, config: AgentConfig, state: ProcedureState, call_tool: ToolCaller, budget: int
    ) -> None:
        self.config = config
        self.state = state
        self.call_tool = call_tool
        self.budget = budget
        self.events: list[StepEvent] = []

    def emit(self, kind: EventKind, text: str | None = None, **payload: Any) -> None:
        self.events.append(StepEvent(kind, text, payload))

    def say(self, template: str) -> None:
        text, missing = render_text(template, self.state.vars)
        if missing:
            self.emit("say", text, missing=missing)
        else:
            self.emit("say", text)

    def handoff(self, template: str | None, *, reason: str, **extra: Any) -> None:
        if template is None:
            text = self.config.agent.handoff_message
        else:
            text = render_text(template, self.state.vars)[0]
        destination = self.config.agent.handoff.destination
        self.emit("handoff", text, reason=reason, destination=destination, **extra)

    def step_list(self, prefix: list[int]) -> list[AnyStep]:
        procedure = self.config.procedures.get(self.state.procedure)
        if procedure is None:
            raise _InvalidState
        steps: list[AnyStep] = list(procedure.steps)
        for position in range(0, len(prefix), 2):
            index, case = prefix[position], prefix[position + 1]
            if index >= len(steps):
                raise _InvalidState
            children = _children(steps[index], case)
            if children is None:
                raise _InvalidState
            steps = children
        return steps

    def current(self) -> AnyStep | None:
        """The step at ``pc``, leaving finished nested lists; None at the end of the steps."""
        pc = self.state.pc
        while True:
            steps = self.step_list(pc[:-1])
            if pc[-1] < len(steps):
                return steps[pc[-1]]
            if len(pc) == 1:
                return None
            del pc[-2:]
            pc[-1] += 1

    async def run(self) -> ProcedureState | None:
        try:
            while (step := self.current()) is not None:
                if self.budget <= 0:
                    logger.warning(
                        "procedure step budget exhausted",
                        extra={
                            "action": "procedure_step_budget",
                            "procedure": self.state.procedure,
                        },
                    )
                    self.handoff(None, reason="step_budget")
                    return None
                self.budget -= 1
                if not await self.execute(step):
                    return self.state if self.state.waiting_for is not None else None
        except _InvalidState:
            self.handoff(None, reason="invalid_state")
        return None

    async def execute(self, step: AnyStep) -> bool:
        """Run one step; False when the turn stops here (waiting for an answer, or finished)."""
        state = self.state
        if isinstance(step, SayStep):
            self.say(step.say)
        elif isinstance(step, AskStep):
            return self.ask(step.ask)
        elif isinstance(step, CallStep):
            return await self.call(step)
        elif isinstance(step, BranchStep):
            for case_index, case in enumerate(step.branch.if_):
                if condition_holds(case.when, state.vars):
                    state.pc.extend([case_index, 0])
                    return True
            if step.branch.else_:
                state.pc.extend([len(step.branch.if_), 0])
                return True
        elif isinstance(step, HandoffStep):
            self.handoff(step.handoff, reason="step")
            return False
        elif isinstance(step, ResolveStep):
            text = render_text(step.resolve, state.vars)[0] if step.resolve else None
            self.emit("resolve", text)
            return False
        elif isinstance(step, EndStep):
            if step.end:
                self.say(step.end)
            return False
        state.pc[-1] += 1
        return True

    def ask(self, ask: AskSpec) -> bool:
        state = self.state
        if ask.prefill and state.trigger:
            value = match_answer(ask, state.trigger)
            if value is not None:
                state.vars[ask.slot] = value
                state.pc[-1] += 1
                return True
        state.waiting_for, state.attempts = ask.slot, 0
        text = render_text(ask.prompt, state.vars)[0]
        self.emit("ask", text, slot=ask.slot, attempt=1, max_attempts=ask.max_attempts)
        return False

    async def answer(self, ask: AskSpec, user_text: str) -> ProcedureState | None:
        state = self.state
        value = match_answer(ask, user_text)
        if value is not None:
            state.vars[ask.slot] = value
            state.waiting_for, state.attempts = None, 0
            state.pc[-1] += 1
            return await self.run()
        state.attempts += 1
        if state.attempts >= ask.max_attempts:
            self.handoff(None, reason="max_attempts", slot=ask.slot)
            return None
        text = render_text(ask.retry or ask.prompt, state.vars)[0]
        attempt = state.attempts + 1
        self.emit("ask", text, slot=ask.slot, attempt=attempt, max_attempts=ask.max_attempts)
        return state

    async def call(self, step: CallStep) -> bool:
        state, spec = self.state, step.call
        inputs = render_value(dict(spec.with_), state.vars)
        tool = self.config.tools.get(spec.tool)
        if tool is None:
            result = ToolResult(ok=False, error=f"unknown tool {spec.tool!r}")
        else:
            try:
                result = await self.call_tool(tool, inputs)
            except Exception as exc:
                # The caller should turn failures into ToolResult; a crash here must not
                # end the conversation, so it takes the same failure path.
                logger.exception(
                    "tool caller raised",
                    extra={"action": "procedure_tool_exception", "tool": spec.tool},
                )
                result = ToolResult(ok=False, error=f"{type(exc).__name__}: {exc}")
        name = spec.result_name
        payload: dict[str, Any] = {
            "tool": spec.tool,
            "inputs": inputs,
            "ok": result.ok,
            "status": result.status,
            "save_as": name,
        }
        if result.ok:
            payload["result"] = result.data
        else:
            payload["error"] = result.error or "tool call failed"
        self.emit("tool_call", None, **payload)
        if result.ok:
            state.vars[name] = copy.deepcopy(result.data)
            state.vars.pop("error", None)
            state.pc[-1] += 1
            return True
        state.vars.pop(name, None)
        state.vars["error"] = {
            "tool": spec.tool,
            "status": result.status,
            "message": payload["error"],
        }
        if spec.on_error:
            state.pc.extend([0, 0])
            return True
        self.emit("say", self.config.agent.error_message)
        self.handoff(None, reason="tool_error", tool=spec.tool)
        return False


def _children(step: AnyStep, case: int) -> list[AnyStep] | None:
    """The nested step list ``case`` of a branch (cases, then else) or a call (on_error)."""
    if isinstance(step, BranchStep):
        cases = step.branch.if_
        if case < len(cases):
            return list(cases[case].then)
        if case == len(cases) and step.branch.else_:
            return list(step.branch.else_)
    elif isinstance(step, CallStep) and case == 0 and step.call.on_error:
        return list(step.call.on_error)
    return None
