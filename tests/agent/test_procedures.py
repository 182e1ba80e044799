"""The built-in engine's step runner, driven with a fake tool caller (no database, no HTTP)."""

from __future__ import annotations

import json
from importlib import resources
from textwrap import dedent
from typing import Any

import pytest

from helpline.agent.procedures import (
    ProcedureState,
    StepEvent,
    ToolResult,
    continue_procedure,
    match_answer,
    start_procedure,
)
from helpline.agentconfig.schema import AgentConfig, Tool, load_config
from helpline.agentconfig.steps import AskStep

TOOLS = {
    "tools/get_order.yaml": dedent(
        """\
        method: GET
        url: https://api.test/orders/{id}
        input: {type: object, properties: {id: {type: string}}}
        """
    ),
    "tools/notify.yaml": dedent(
        """\
        method: POST
        url: https://api.test/notify
        input: {type: object, properties: {count: {type: integer}, note: {type: string}}}
        """
    ),
}


class FakeTools:
    """Answers tool calls from a table and records every call."""

    def __init__(self, **results: ToolResult | Exception) -> None:
        self.results = results
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, tool: Tool, inputs: dict[str, Any]) -> ToolResult:
        name = next(key for key, value in self.config_tools.items() if value is tool)
        self.calls.append((name, inputs))
        result = self.results[name]
        if isinstance(result, Exception):
            raise result
        return result

    def bind(self, config: AgentConfig) -> FakeTools:
        self.config_tools = config.tools
        return self


def demo_config() -> AgentConfig:
    root = resources.files("helpline.demo") / "agent"
    files: dict[str, bytes | str] = {}
    for folder in ("", "procedures/", "tools/"):
        node = root / folder if folder else root
        for child in node.iterdir():
            if child.is_file():
                files[folder + child.name] = child.read_bytes()
    config, errors = load_config(files)
    assert errors == [] and config is not None
    return config


def config_with(steps: str, agent: str = "name: Test\n") -> AgentConfig:
    """A config whose procedure ``p`` has these steps (YAML list, unindented)."""
    files = {"agent.yaml": agent, "procedures/p.yaml": "triggers: [x]\nsteps:\n" + dedent(steps)}
    config, errors = load_config({**TOOLS, **files})
    assert errors == [], [str(error) for error in errors]
    assert config is not None
    return config


def kinds(events: list[StepEvent]) -> list[str]:
    return [event.kind for event in events]


def texts(events: list[StepEvent]) -> list[str | None]:
    return [event.text for event in events]


SHIPPED = ToolResult(
    ok=True,
    status=200,
    data={"status": "shipped", "carrier": "UPS", "tracking_number": "1Z999", "eta": "May 3"},
)


# --- the demo procedures -------------------------------------------------------------------


def test_demo_order_pattern_accepts_the_usual_spellings() -> None:
    ask = demo_config().procedures["order_status"].steps[0]
    assert isinstance(ask, AskStep)
    for text in ("A-12345", "a12345", "it's order #12345 thanks", "12345"):
        assert match_answer(ask.ask, text) == "12345"
    for text in ("123456", "A-1234", "no idea"):
        assert match_answer(ask.ask, text) is None


async def test_order_status_asks_retries_then_looks_up_and_resolves() -> None:
    config = demo_config()
    tools = FakeTools(lookup_order=SHIPPED).bind(config)

    state, events = await start_procedure(config, "order_status", call_tool=tools)
    assert kinds(events) == ["ask"]
    assert "order number" in (events[0].text or "")
    assert events[0].payload == {"slot": "order_number", "attempt": 1, "max_attempts": 3}
    assert state is not None and state.waiting_for == "order_number"

    state, events = await continue_procedure(config, state, "I don't know", call_tool=tools)
    assert kinds(events) == ["ask"]
    assert events[0].text and events[0].text.startswith("Hmm, that doesn't look like")
    assert events[0].payload["attempt"] == 2
    assert tools.calls == []
    assert state is not None

    state, events = await continue_procedure(config, state, "it's A-12345", call_tool=tools)
    assert state is None
    assert kinds(events) == ["tool_call", "say", "resolve"]
    assert tools.calls == [("lookup_order", {"order_number": "12345"})]
    call = events[0].payload
    assert call["tool"] == "lookup_order" and call["ok"] is True and call["status"] == 200
    assert call["inputs"] == {"order_number": "12345"} and call["result"] == SHIPPED.data
    assert events[1].text == (
        "Good news: order A-12345 has shipped with UPS. Tracking number: 1Z999. "
        "Expected delivery: May 3."
    )
    assert events[2].text == "Is there anything else I can help you with?"


async def test_order_number_in_the_first_message_is_used_without_asking() -> None:
    config = demo_config()
    tools = FakeTools(lookup_order=SHIPPED).bind(config)
    state, events = await start_procedure(
        config, "order_status", call_tool=tools, user_text="where is my order a-54321??"
    )
    assert state is None
    assert kinds(events) == ["tool_call", "say", "resolve"]
    assert tools.calls == [("lookup_order", {"order_number": "54321"})]


async def test_order_not_found_ends_without_handoff_or_resolve() -> None:
    config = demo_config()
    tools = FakeTools(lookup_order=ToolResult(ok=False, status=404, error="HTTP 404")).bind(config)
    state, events = await start_procedure(
        config, "order_status", call_tool=tools, user_text="11111"
    )
    assert state is None
    assert kinds(events) == ["tool_call", "say"]
    assert events[0].payload["ok"] is False and events[0].payload["error"] == "HTTP 404"
    assert events[1].text and events[1].text.startswith("I couldn't find order A-11111.")


async def test_order_system_down_hands_off_with_the_step_message() -> None:
    config = demo_config()
    tools = FakeTools(lookup_order=ToolResult(ok=False, status=503, error="HTTP 503")).bind(config)
    state, events = await start_procedure(
        config, "order_status", call_tool=tools, user_text="11111"
    )
    assert state is None
    assert kinds(events) == ["tool_call", "handoff"]
    assert events[1].text and "check order A-11111" in events[1].text
    assert events[1].payload == {"reason": "step", "destination": "AGENT"}


async def test_unusual_order_status_takes_the_else_branch() -> None:
    config = demo_config()
    lost = ToolResult(ok=True, status=200, data={"status": "lost_in_space"})
    tools = FakeTools(lookup_order=lost).bind(config)
    _, events = await start_procedure(config, "order_status", call_tool=tools, user_text="22222")
    assert kinds(events) == ["tool_call", "handoff"]
    assert "(lost_in_space)" in (events[1].text or "")


async def test_three_wrong_answers_hand_off() -> None:
    config = demo_config()
    tools = FakeTools().bind(config)
    state, _ = await start_procedure(config, "order_status", call_tool=tools)
    for attempt in (2, 3):
        assert state is not None
        state, events = await continue_procedure(config, state, "dunno", call_tool=tools)
        assert kinds(events) == ["ask"] and events[0].payload["attempt"] == attempt
    assert state is not None
    state, events = await continue_procedure(config, state, "still dunno", call_tool=tools)
    assert state is None
    assert kinds(events) == ["handoff"]
    assert events[0].text == config.agent.handoff_message
    assert events[0].payload == {
        "reason": "max_attempts",
        "destination": "AGENT",
        "slot": "order_number",
    }


async def test_cancel_subscription_confirmed() -> None:
    config = demo_config()
    done = ToolResult(ok=True, status=200, data={"cancelled": True, "ends_on": "June 30"})
    tools = FakeTools(cancel_plus=done).bind(config)
    state, events = await start_procedure(config, "cancel_subscription", call_tool=tools)
    assert kinds(events) == ["say", "ask"]
    assert state is not None
    state, events = await continue_procedure(config, state, "bob@example.com", call_tool=tools)
    assert kinds(events) == ["ask"]
    assert "cancel Acme Plus for bob@example.com?" in (events[0].text or "")
    assert state is not None
    state, events = await continue_procedure(config, state, "Yes please", call_tool=tools)
    assert state is None
    assert kinds(events) == ["tool_call", "resolve"]
    assert tools.calls == [("cancel_plus", {"email": "bob@example.com"})]
    assert events[1].text and "active until June 30" in events[1].text


async def test_cancel_subscription_declined_calls_nothing() -> None:
    config = demo_config()
    tools = FakeTools().bind(config)
    state, _ = await start_procedure(
        config, "cancel_subscription", call_tool=tools, user_text="cancel plus for bob@example.com"
    )
    assert state is not None and state.waiting_for == "confirm"  # email taken from the message
    state, events = await continue_procedure(config, state, "no", call_tool=tools)
    assert state is None
    assert kinds(events) == ["resolve"]
    assert tools.calls == []


async def test_say_only_procedure_finishes_without_resolving() -> None:
    config = demo_config()
    state, events = await start_procedure(
        config, "shipping_policy", call_tool=FakeTools().bind(config)
    )
    assert state is None
    assert kinds(events) == ["say", "say"]


# --- tool failures -------------------------------------------------------------------------


async def test_failed_call_without_on_error_apologises_and_hands_off() -> None:
    config = config_with(
        "- call: {tool: get_order, with: {id: '1'}}\n- say: never\n",
        agent="name: T\nerror_message: Oops.\nhandoff: {destination: Zendesk}\n",
    )
    tools = FakeTools(get_order=ToolResult(ok=False, status=None, error="timeout")).bind(config)
    state, events = await start_procedure(config, "p", call_tool=tools)
    assert state is None
    assert kinds(events) == ["tool_call", "say", "handoff"]
    assert events[0].payload["error"] == "timeout" and events[0].payload["status"] is None
    assert events[1].text == "Oops."
    assert events[2].payload == {
        "reason": "tool_error",
        "destination": "Zendesk",
        "tool": "get_order",
    }


async def test_a_raising_tool_caller_takes_the_failure_path() -> None:
    config = config_with(
        """\
        - call:
            tool: get_order
            with: {id: "1"}
            on_error: [say: "Failed: {error.message}"]
        - say: "after: {get_order.status}"
        """
    )
    tools = FakeTools(get_order=RuntimeError("boom")).bind(config)
    state, events = await start_procedure(config, "p", call_tool=tools)
    assert state is None
    assert kinds(events) == ["tool_call", "say", "say"]
    assert events[1].text == "Failed: RuntimeError: boom"
    # the list after on_error goes on; the failed result is unset, so it renders empty
    assert events[2].text == "after: " and events[2].payload == {"missing": ["get_order.status"]}


async def test_error_variable_is_cleared_by_a_later_success() -> None:
    config = config_with(
        """\
        - call: {tool: get_order, with: {id: "1"}, on_error: [say: "first failed"]}
        - call: {tool: notify, with: {note: x}}
        - ask: {slot: pause, prompt: "?"}
        """
    )
    tools = FakeTools(
        get_order=ToolResult(ok=False, status=500, error="HTTP 500"),
        notify=ToolResult(ok=True, status=204, data=None),
    ).bind(config)
    state, events = await start_procedure(config, "p", call_tool=tools)
    assert texts(events) == [None, "first failed", None, "?"]
    assert state is not None
    assert "error" not in state.vars and "get_order" not in state.vars
    assert "notify" in state.vars and state.vars["notify"] is None


# --- branches, interpolation, values -------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"code": 404}, "equals number"),
        ({"code": "404"}, "equals number"),
        ({"code": 1, "state": "pending"}, "in list"),
        ({"code": 1, "state": "Shipped-Late"}, "matches"),
        ({"code": 1, "items": [{"sku": "X1"}]}, "nested exists"),
        ({"code": 1, "gone": None}, "missing"),
    ],
)
async def test_branch_conditions(data: dict[str, Any], expected: str) -> None:
    config = config_with(
        """\
        - call: {tool: get_order, with: {id: "1"}, save_as: o}
        - branch:
            if:
              - when: {var: o.code, equals: 404}
                then: [say: equals number]
              - when: {var: o.state, in: [pending, processing]}
                then: [say: in list]
              - when: {var: o.state, matches: "(?i)^shipped"}
                then: [say: matches]
              - when: {var: o.items.0.sku, exists: true}
                then: [say: nested exists]
              - when: {var: o.gone, exists: false}
                then: [say: missing]
        """
    )
    tools = FakeTools(get_order=ToolResult(ok=True, status=200, data=data)).bind(config)
    _, events = await start_procedure(config, "p", call_tool=tools)
    assert texts(events)[1:] == [expected]


async def test_no_matching_case_and_no_else_continues_after_the_branch() -> None:
    config = config_with(
        """\
        - branch:
            if: [{when: {var: metadata.plan, equals: plus}, then: [say: plus]}]
        - say: after
        """
    )
    _, events = await start_procedure(config, "p", call_tool=FakeTools().bind(config))
    assert texts(events) == ["after"]


async def test_interpolation_of_metadata_lists_and_missing_values() -> None:
    config = config_with(
        """\
        - say: "Hi {metadata.name}, items: {metadata.items}, vip: {metadata.vip}, x: {metadata.x}"
        """
    )
    metadata = {"name": "Ann", "items": ["a", "b"], "vip": True}
    _, events = await start_procedure(config, "p", call_tool=FakeTools(), metadata=metadata)
    assert events == [
        StepEvent("say", "Hi Ann, items: a, b, vip: yes, x: ", {"missing": ["metadata.x"]})
    ]


async def test_tool_inputs_keep_json_types_for_whole_placeholders() -> None:
    config = config_with(
        "- call: {tool: notify, with: {count: '{metadata.count}', note: 'n={metadata.count}'}}\n"
    )
    tools = FakeTools(notify=ToolResult(ok=True, status=200, data={})).bind(config)
    await start_procedure(config, "p", call_tool=tools, metadata={"count": 3})
    assert tools.calls == [("notify", {"count": 3, "note": "n=3"})]


async def test_ask_without_pattern_takes_any_non_empty_answer() -> None:
    config = config_with(
        """\
        - ask: {slot: reason, prompt: "Why?", retry: "Please tell me why.", max_attempts: 2}
        - handoff: "Thanks, passing on: {reason}"
        """
    )
    tools = FakeTools().bind(config)
    state, _ = await start_procedure(config, "p", call_tool=tools)
    assert state is not None
    state, events = await continue_procedure(config, state, "   ", call_tool=tools)
    assert texts(events) == ["Please tell me why."]
    assert state is not None
    state, events = await continue_procedure(config, state, "  it broke  ", call_tool=tools)
    assert state is None
    assert events == [
        StepEvent(
            "handoff", "Thanks, passing on: it broke", {"reason": "step", "destination": "AGENT"}
        )
    ]


async def test_resolve_and_end_messages() -> None:
    config = config_with(
        """\
        - ask: {slot: a, prompt: "?", pattern: "^(r|e|q)$"}
        - branch:
            if:
              - when: {var: a, equals: r}
                then: [resolve: "Resolved {a}"]
              - when: {var: a, equals: e}
                then: [end: "Ended {a}"]
            else: [end]
        """
    )
    tools = FakeTools().bind(config)
    results = {}
    for answer in ("r", "e", "q"):
        state, _ = await start_procedure(config, "p", call_tool=tools)
        assert state is not None
        final, events = await continue_procedure(config, state, answer, call_tool=tools)
        assert final is None
        results[answer] = [(event.kind, event.text) for event in events]
    assert results == {
        "r": [("resolve", "Resolved r")],
        "e": [("say", "Ended e")],
        "q": [],
    }


# --- state, budget, robustness -------------------------------------------------------------


async def test_state_survives_json_and_the_callers_copy_is_not_changed() -> None:
    config = demo_config()
    tools = FakeTools(lookup_order=SHIPPED).bind(config)
    state, _ = await start_procedure(config, "order_status", call_tool=tools, metadata={"k": "v"})
    assert state is not None
    stored = json.loads(json.dumps(state.to_dict()))
    restored = ProcedureState.from_dict(stored)
    assert restored == state
    final, events = await continue_procedure(config, restored, "A-12345", call_tool=tools)
    assert final is None and kinds(events) == ["tool_call", "say", "resolve"]
    assert restored.waiting_for == "order_number" and "order" not in restored.vars


async def test_state_inside_a_nested_list_resumes_there() -> None:
    config = config_with(
        """\
        - branch:
            if:
              - when: {var: metadata.ok, exists: true}
                then:
                  - ask: {slot: x, prompt: "x?"}
                  - say: "inner {x}"
        - say: outer
        """
    )
    tools = FakeTools().bind(config)
    state, _ = await start_procedure(config, "p", call_tool=tools, metadata={"ok": 1})
    assert state is not None and state.pc == [0, 0, 0]
    state = ProcedureState.from_dict(json.loads(json.dumps(state.to_dict())))
    final, events = await continue_procedure(config, state, "42", call_tool=tools)
    assert final is None
    assert texts(events) == ["inner 42", "outer"]


async def test_step_budget_stops_a_runaway_turn() -> None:
    config = config_with("".join(f"- say: line {n}\n" for n in range(10)))
    state, events = await start_procedure(config, "p", call_tool=FakeTools(), max_steps=4)
    assert state is None
    assert texts(events)[:4] == ["line 0", "line 1", "line 2", "line 3"]
    assert kinds(events) == ["say"] * 4 + ["handoff"]
    assert events[-1].payload["reason"] == "step_budget"


async def test_a_state_that_does_not_fit_the_config_hands_off() -> None:
    config = demo_config()
    tools = FakeTools().bind(config)
    for state in (
        ProcedureState("order_status", [0], {}, waiting_for="email"),
        ProcedureState("order_status", [7, 0, 0], {}, waiting_for="order_number"),
        ProcedureState("gone", [0], {}, waiting_for="order_number"),
    ):
        final, events = await continue_procedure(config, state, "A-12345", call_tool=tools)
        assert final is None
        assert kinds(events) == ["handoff"]
        assert events[0].payload["reason"] == "invalid_state"
    assert tools.calls == []


def test_malformed_state_dicts_are_rejected() -> None:
    for data in ({}, {"procedure": "p", "pc": []}, {"procedure": "p", "pc": [0, 1]}):
        with pytest.raises(ValueError, match="malformed"):
            ProcedureState.from_dict(data)


async def test_unknown_procedure_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        await start_procedure(demo_config(), "nope", call_tool=FakeTools())
