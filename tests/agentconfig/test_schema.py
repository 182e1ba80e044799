"""Agent repository validation: the demo repo, every kind of error, snapshots, tool requests."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from textwrap import dedent

import pytest

from helpline.agentconfig.schema import (
    AgentConfig,
    ConfigError,
    config_from_snapshot,
    config_to_snapshot,
    load_config,
)
from helpline.agentconfig.steps import BranchStep, CallStep, EndStep, ResolveStep
from helpline.agentconfig.templates import render_tool_request

AGENT = "name: Test agent\n"
TOOL = dedent(
    """\
    method: GET
    url: https://api.example.test/orders/{id}
    headers:
      Authorization: Bearer {{user_token}}
    input:
      type: object
      properties:
        id: {type: string}
      required: [id]
    """
)


def demo_files() -> dict[str, bytes]:
    """The demo agent repository as it would be committed."""
    root = resources.files("helpline.demo") / "agent"
    files: dict[str, bytes] = {}

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                files[f"{prefix}{child.name}"] = child.read_bytes()

    walk(root, "")
    return files


def repo(**files: str | None) -> dict[str, str]:
    """A small valid repository (agent + one tool) with files added, replaced or removed.

    Keyword ``procedures__p`` stands for ``procedures/p.yaml``; other paths go in verbatim.
    """
    base: dict[str, str | None] = {"agent.yaml": AGENT, "tools/get_order.yaml": TOOL}
    for path, text in files.items():
        base[path.replace("__", "/") + ".yaml" if "__" in path else path] = text
    return {path: dedent(text) for path, text in base.items() if text is not None}


def procedure(steps: str, extra: str = "") -> str:
    """A procedure file with the given (already indented) steps block."""
    return "triggers: [help me]\n" + extra + "steps:\n" + dedent(steps)


def errors(files: dict[str, str]) -> list[str]:
    config, found = load_config(files)
    assert config is None, "expected the repository to be invalid"
    assert found
    return [str(error) for error in found]


def valid(files: dict[str, str]) -> AgentConfig:
    config, found = load_config(files)
    assert found == []
    assert config is not None
    return config


# --- the demo repository -------------------------------------------------------------------


def test_demo_repository_validates() -> None:
    config = valid(demo_files())  # type: ignore[arg-type]
    assert config.agent.name == "Acme Support"
    assert config.agent.engine == "builtin"
    assert {"order_status", "cancel_subscription", "shipping_policy"} <= set(config.procedures)
    assert set(config.tools) == {"lookup_order", "cancel_plus"}
    assert config.tools["lookup_order"].method == "GET"
    assert "{{user_token}}" in config.tools["cancel_plus"].headers["Authorization"]
    assert {tag.name for tag in config.tags} >= {"orders", "acme-plus"}


def test_minimal_repository_gets_defaults() -> None:
    config = valid({"agent.yaml": "name: Solo\n"})
    assert config.agent.engine == "builtin"
    assert config.agent.handoff.destination == "AGENT"
    assert config.agent.fallback_message
    assert config.procedures == {} and config.tools == {} and config.tags == []


# --- snapshots -----------------------------------------------------------------------------


def test_snapshot_round_trip_through_json() -> None:
    config = valid(demo_files())  # type: ignore[arg-type]
    snapshot = json.loads(json.dumps(config_to_snapshot(config)))
    assert snapshot["snapshot_version"] == 1
    assert config_from_snapshot(snapshot) == config


def test_snapshot_keeps_yaml_key_names_and_null_comparisons() -> None:
    files = repo(
        procedures__p=procedure(
            """\
            - call: {tool: get_order, with: {id: "1"}, save_as: order}
            - branch:
                if:
                  - when: {var: order.deleted_at, equals: null}
                    then: [say: still there]
                else: [end]
            """
        )
    )
    config = valid(files)
    snapshot = config_to_snapshot(config)
    steps = snapshot["procedures"]["p"]["steps"]
    assert steps[0]["call"]["with"] == {"id": "1"}
    assert steps[1]["branch"]["if"][0]["when"] == {"var": "order.deleted_at", "equals": None}
    assert "else" in steps[1]["branch"]
    assert config_from_snapshot(snapshot) == config


def test_snapshot_with_unknown_version_is_refused() -> None:
    snapshot = config_to_snapshot(valid(repo()))
    snapshot["snapshot_version"] = 99
    with pytest.raises(ValueError, match="snapshot version"):
        config_from_snapshot(snapshot)


# --- file-level errors ---------------------------------------------------------------------


def test_missing_agent_yaml() -> None:
    assert errors({"tools/get_order.yaml": TOOL}) == [
        "agent.yaml: missing: every agent repository needs one"
    ]


def test_yaml_syntax_error_names_file_and_line() -> None:
    found = errors(repo(procedures__p="triggers: [a\nsteps: []\n"))
    assert len(found) == 1
    assert found[0].startswith("procedures/p.yaml: invalid YAML at line 2")


def test_duplicate_yaml_keys_are_errors() -> None:
    found = errors(repo(**{"agent.yaml": "name: A\nname: B\n"}))
    assert found == ["agent.yaml: invalid YAML at line 2, column 1: duplicate key 'name'"]


def test_wrong_top_level_types() -> None:
    found = errors(repo(**{"agent.yaml": "- name: A\n", "tags.yaml": "name: x\n"}))
    assert "agent.yaml: must be a YAML mapping (key: value lines)" in found
    assert any(error.startswith("tags.yaml: must be a YAML list") for error in found)


def test_yaml_values_must_be_json_and_dates_stay_text() -> None:
    config = valid(repo(procedures__p=procedure("- say: 2024-05-01\n")))
    assert config.procedures["p"].steps[0].say == "2024-05-01"  # type: ignore[union-attr]
    found = errors(repo(**{"agent.yaml": "name: !!binary aGVsbG8=\nllm: {temperature: .nan}\n"}))
    assert found == [
        "agent.yaml: name: unsupported YAML value (only text, numbers, booleans, null, lists "
        "and mappings)"
    ]


def test_non_utf8_file() -> None:
    config, found = load_config({"agent.yaml": b"name: \xff\xfe\n"})
    assert config is None
    assert [str(error) for error in found] == ["agent.yaml: not UTF-8 text"]


def test_layout_unexpected_files_are_errors_and_docs_are_ignored() -> None:
    files = repo(
        **{
            "README.md": "# hi",
            ".gitignore": "*.tmp",
            "docs/notes.md": "notes",
            ".github/workflows/ci.yaml": "on: push",
            "notes.txt": "x",
            "procedure/p.yaml": "x: 1",
            "procedures/nested/p.yaml": "x: 1",
            "procedures/p.yml": "x: 1",
            "procedures/Bad-Name.yaml": "x: 1",
            "agent.yml": "name: x",
        }
    )
    found = errors(files)
    assert len(found) == 6
    assert any(e.startswith("notes.txt: unexpected file") for e in found)
    assert any(e.startswith("procedure/p.yaml: unexpected file") for e in found)
    assert any(e.startswith("procedures/nested/p.yaml: unexpected file") for e in found)
    assert "procedures/p.yml: use the .yaml extension: procedures/p.yaml" in found
    assert "agent.yml: use the .yaml extension: agent.yaml" in found
    assert any(e.startswith("procedures/Bad-Name.yaml: file name must") for e in found)


# --- unknown keys and field errors ---------------------------------------------------------


def test_unknown_keys_are_rejected_at_every_level() -> None:
    files = repo(
        **{
            "agent.yaml": "name: A\ncolour: blue\nllm: {model: m, temprature: 1}\n",
            "procedures/p.yaml": procedure(
                """\
                - ask: {slot: x, prompt: hi, promt: typo}
                - branch:
                    if:
                      - when: {var: x, equals: 1, case: true}
                        then: [say: one]
                """
            ),
            "tools/get_order.yaml": TOOL + "retries: 3\n",
            "tags.yaml": "- {name: a, level: 1, colour: red}\n",
        }
    )
    found = errors(files)
    assert "agent.yaml: colour: unknown key" in found
    assert "agent.yaml: llm.temprature: unknown key" in found
    assert "procedures/p.yaml: steps[0].ask.promt: unknown key" in found
    assert "procedures/p.yaml: steps[1].branch.if[0].when.case: unknown key" in found
    assert "tools/get_order.yaml: retries: unknown key" in found
    assert "tags.yaml: [0].colour: unknown key" in found


def test_agent_field_errors() -> None:
    found = errors(
        repo(
            **{
                "agent.yaml": (
                    "instructions: hi\nengine: gpt\nllm: {temperature: 3}\n"
                    "handoff: {webhook_url: 'ftp://x'}\n"
                )
            }
        )
    )
    assert "agent.yaml: name: required" in found
    engine = "agent.yaml: engine: Input should be 'builtin' or 'llm'"
    assert any(e.startswith(engine) for e in found)
    assert any(e.startswith("agent.yaml: llm.temperature:") for e in found)
    assert "agent.yaml: handoff.webhook_url: must be an absolute http:// or https:// URL" in found


def test_procedure_needs_a_trigger() -> None:
    found = errors(repo(procedures__p="triggers: []\nsteps: [say: hi]\n"))
    expected = "procedures/p.yaml: triggers: List should have at least 1"
    assert any(e.startswith(expected) for e in found)


def test_invalid_step_shapes() -> None:
    found = errors(
        repo(
            procedures__p=procedure(
                """\
                - {say: a, ask: b}
                - jump: 3
                - say: 42
                - ask: {slot: Order, prompt: x}
                """
            )
        )
    )
    shape = "a step is a mapping with exactly one of the keys: say, ask, call, branch, handoff"
    assert any(e.startswith(f"procedures/p.yaml: steps[0]: {shape}") for e in found)
    assert any(e.startswith(f"procedures/p.yaml: steps[1]: {shape}") for e in found)
    assert "procedures/p.yaml: steps[2].say: Input should be a valid string" in found
    assert any(e.startswith("procedures/p.yaml: steps[3].ask.slot: must start with") for e in found)


def test_bare_word_steps_and_optional_messages() -> None:
    config = valid(
        repo(
            procedures__p=procedure(
                """\
                - ask: {slot: x, prompt: "Yes or no?", pattern: "(?i)^(yes|no)$"}
                - branch:
                    if:
                      - when: {var: x, matches: "(?i)yes"}
                        then: [resolve]
                      - when: {var: x, equals: "no"}
                        then: [end]
                    else:
                      - handoff
                """
            )
        )
    )
    branch = config.procedures["p"].steps[1]
    assert isinstance(branch, BranchStep)
    assert isinstance(branch.branch.if_[0].then[0], ResolveStep)
    assert branch.branch.if_[0].then[0].resolve is None
    assert isinstance(branch.branch.if_[1].then[0], EndStep)


def test_invalid_regular_expressions() -> None:
    found = errors(
        repo(
            procedures__p=procedure(
                """\
                - ask: {slot: x, prompt: p, pattern: "(unclosed"}
                - branch:
                    if: [{when: {var: x, matches: "[a-"}, then: [say: hi]}]
                """
            )
        )
    )
    assert any(
        e.startswith("procedures/p.yaml: steps[0].ask.pattern: invalid regular expression")
        for e in found
    )
    assert any(
        e.startswith("procedures/p.yaml: steps[1].branch.if[0].when.matches: invalid regular")
        for e in found
    )


def test_condition_needs_exactly_one_operator() -> None:
    found = errors(
        repo(
            procedures__p=procedure(
                """\
                - ask: {slot: x, prompt: p}
                - branch: {if: [{when: {var: x}, then: [say: a]}]}
                - branch: {if: [{when: {var: x, equals: 1, exists: true}, then: [say: a]}]}
                """
            )
        )
    )
    message = "a condition needs exactly one of: equals, in, matches, exists"
    assert f"procedures/p.yaml: steps[1].branch.if[0].when: {message}" in found
    assert f"procedures/p.yaml: steps[2].branch.if[0].when: {message}" in found


def test_ask_limits_and_reserved_slot_names() -> None:
    found = errors(
        repo(
            procedures__p=procedure(
                """\
                - ask: {slot: error, prompt: p}
                - ask: {slot: y, prompt: p, max_attempts: 0}
                - ask: {slot: z, prompt: ""}
                """
            )
        )
    )
    assert "procedures/p.yaml: steps[0].ask.slot: 'error' is reserved" in found
    assert any(e.startswith("procedures/p.yaml: steps[1].ask.max_attempts:") for e in found)
    assert any(e.startswith("procedures/p.yaml: steps[2].ask.prompt:") for e in found)


# --- tools ---------------------------------------------------------------------------------


def test_tool_field_errors() -> None:
    found = errors(
        repo(
            tools__bad=dedent(
                """\
                method: FETCH
                url: /relative/{id}
                headers: {"Bad Header": x}
                input: {type: array}
                timeout: 60
                """
            ),
            tools__worse=(
                "method: post\nurl: https://x.test\ninput: {type: object, required: [a]}\n"
            ),
        )
    )
    assert any(e.startswith("tools/bad.yaml: method: Input should be 'GET'") for e in found)
    assert "tools/bad.yaml: url: must be an absolute http:// or https:// URL" in found
    assert "tools/bad.yaml: headers: invalid header name 'Bad Header'" in found
    assert "tools/bad.yaml: input: must be a JSON schema with type: object" in found
    assert "tools/bad.yaml: timeout: Input should be less than or equal to 30" in found
    assert "tools/worse.yaml: input: required input 'a' is not in properties" in found


def test_tool_placeholders_must_be_inputs_or_the_user_token() -> None:
    tool = dedent(
        """\
        method: GET
        url: https://x.test/{id}/{other}
        headers: {X-Key: "{{api_key}}", X-User: "{{ user_token }}"}
        input: {type: object, properties: {id: {type: string}}}
        """
    )
    found = errors(repo(tools__t=tool))
    assert found == [
        "tools/t.yaml: url: placeholder {other} is not an input of this tool (input.properties)",
        "tools/t.yaml: headers.X-Key: unknown placeholder {{api_key}}: only {{user_token}} exists",
    ]


def test_tool_method_is_case_insensitive_and_timeout_defaults() -> None:
    config = valid(repo(tools__t="method: post\nurl: https://x.test/cancel\n"))
    assert config.tools["t"].method == "POST"
    assert config.tools["t"].timeout == 5


# --- cross-file checks ---------------------------------------------------------------------


def test_unknown_tool_is_reported_with_a_suggestion() -> None:
    found = errors(
        repo(procedures__order_status=procedure("- call: {tool: get_ordr, with: {id: '1'}}\n"))
    )
    assert found == [
        "procedures/order_status.yaml: steps[0].call.tool: unknown tool 'get_ordr' "
        "(did you mean 'get_order'?)"
    ]


def test_call_inputs_must_match_the_tool_schema() -> None:
    found = errors(repo(procedures__p=procedure("- call: {tool: get_order, with: {idd: '1'}}\n")))
    assert found == [
        "procedures/p.yaml: steps[0].call.with.idd: 'idd' is not an input of tool 'get_order'",
        "procedures/p.yaml: steps[0].call.with: missing required input 'id' of tool 'get_order'",
    ]


def test_a_broken_tool_file_does_not_cause_unknown_tool_errors() -> None:
    found = errors(
        repo(
            **{"tools/get_order.yaml": "method: GET\n"},
            procedures__p=procedure("- call: {tool: get_order, with: {id: '1'}}\n"),
        )
    )
    assert found == ["tools/get_order.yaml: url: required"]


def test_unknown_tags() -> None:
    files = repo(
        **{"tags.yaml": "- {name: orders, level: 1}\n"},
        procedures__p=procedure("- say: hi\n", extra="tags: [orders, order]\n"),
    )
    assert errors(files) == [
        "procedures/p.yaml: tags[1]: unknown tag 'order' (not in tags.yaml) "
        "(did you mean 'orders'?)"
    ]


def test_tag_taxonomy_rules() -> None:
    tags = dedent(
        """\
        - {name: orders, level: 1}
        - {name: shipping, level: 2, parent: orders}
        - {name: late, level: 3, parent: shipping}
        - {name: orphan, level: 2}
        - {name: rooted, level: 1, parent: orders}
        - {name: skip, level: 3, parent: orders}
        - {name: lost, level: 2, parent: nowhere}
        - {name: orders, level: 1}
        """
    )
    assert errors(repo(**{"tags.yaml": tags})) == [
        "tags.yaml: [7].name: duplicate tag 'orders'",
        "tags.yaml: [3].parent: required for a level-2 tag",
        "tags.yaml: [4].parent: a level-1 tag has no parent",
        "tags.yaml: [5].parent: parent 'orders' has level 1; a level-3 tag needs a level-2 parent",
        "tags.yaml: [6].parent: unknown tag 'nowhere'",
    ]


def test_variables_must_be_set_before_use() -> None:
    found = errors(
        repo(
            procedures__p=procedure(
                """\
                - say: "Status: {order.status}"
                - call:
                    tool: get_order
                    with: {id: "{order_id}"}
                    save_as: order
                    on_error:
                      - say: "Failed with {error.status}"
                      - handoff
                - say: "{error.message}"
                - branch:
                    if: [{when: {var: nothing.here, exists: true}, then: [say: x]}]
                """
            )
        )
    )
    assert found == [
        "procedures/p.yaml: steps[0].say: uses 'order.status' before any earlier step sets "
        "'order' (an ask slot or a call's save_as)",
        "procedures/p.yaml: steps[1].call.with.id: uses 'order_id' before any earlier step sets "
        "'order_id' (an ask slot or a call's save_as)",
        "procedures/p.yaml: steps[2].say: uses 'error.message' before any earlier step sets "
        "'error' (an ask slot or a call's save_as)",
        "procedures/p.yaml: steps[3].branch.if[0].when.var: uses 'nothing.here' before any "
        "earlier step sets 'nothing' (an ask slot or a call's save_as)",
    ]


def test_variables_set_in_branches_metadata_and_default_result_name_are_known() -> None:
    valid(
        repo(
            procedures__p=procedure(
                """\
                - say: "Hi {metadata.first_name}"
                - branch:
                    if:
                      - when: {var: metadata.plan, equals: plus}
                        then: [ask: {slot: email, prompt: "Email?"}]
                    else: [ask: {slot: phone, prompt: "Phone?"}]
                - say: "Thanks {email}{phone}"
                - call: {tool: get_order, with: {id: "{email}"}}
                - say: "{get_order.status}"
                """
            )
        )
    )


def test_user_token_never_appears_in_procedure_text() -> None:
    found = errors(repo(procedures__p=procedure("- say: 'your token is {{user_token}}'\n")))
    assert found == [
        "procedures/p.yaml: steps[0].say: {{user_token}} is only available in a tool's url "
        "and headers"
    ]


def test_steps_after_an_ending_step_are_errors() -> None:
    found = errors(repo(procedures__p=procedure("- resolve: bye\n- say: hello?\n")))
    assert found == [
        "procedures/p.yaml: steps[1]: never runs: the previous step (resolve) ends the procedure"
    ]


def test_nesting_depth_is_limited() -> None:
    nested = "say: deep"
    for _ in range(6):
        nested = "branch: {if: [{when: {var: metadata, exists: true}, then: [" + nested + "]}]}"
    found = errors(repo(procedures__p=procedure(f"- {nested}\n")))
    assert len(found) == 1
    assert found[0].endswith("steps nested deeper than 5 levels")


def test_engine_specific_requirements() -> None:
    builtin = errors(repo(procedures__p="triggers: [a]\ninstructions: do it\n"))
    assert builtin == [
        "procedures/p.yaml: steps: required: the builtin engine runs a procedure's steps"
    ]
    llm_agent = "name: A\nengine: llm\n"
    llm = errors(repo(**{"agent.yaml": llm_agent}, procedures__p="triggers: [a]\nsteps: [end]\n"))
    assert llm == [
        "procedures/p.yaml: instructions: required: the llm engine follows a procedure's "
        "instructions"
    ]


def test_config_error_string_and_fields() -> None:
    error = ConfigError("procedures/p.yaml", "steps[2].call.tool", "unknown tool 'x'")
    assert str(error) == "procedures/p.yaml: steps[2].call.tool: unknown tool 'x'"
    assert str(ConfigError("agent.yaml", "", "missing")) == "agent.yaml: missing"


def test_bytes_and_text_contents_are_both_accepted() -> None:
    config = valid({"agent.yaml": "name: Café\n".encode(), "tags.yaml": ""})
    assert config.agent.name == "Café"


# --- tool requests -------------------------------------------------------------------------


def test_render_get_request_quotes_url_values_and_passes_the_rest_as_query() -> None:
    config = valid(
        repo(
            tools__search=dedent(
                """\
                method: GET
                url: https://api.test/orders/{id}
                headers: {Authorization: "Bearer {{user_token}}", X-Id: "{id}"}
                input:
                  type: object
                  properties: {id: {type: string}, verbose: {type: boolean}, q: {type: string}}
                """
            )
        )
    )
    tool = config.tools["search"]
    request = render_tool_request(tool, {"id": "A/1 2", "verbose": True, "q": None}, "tok")
    assert request.url == "https://api.test/orders/A%2F1%202"
    assert request.headers == {"Authorization": "Bearer tok", "X-Id": "A/1 2"}
    assert request.params == {"verbose": True}
    assert request.json_body is None
    anonymous = render_tool_request(tool, {"id": "1"}, None)
    assert anonymous.headers == {"X-Id": "1"}  # no token: the Authorization header is left out


def test_render_post_request_sends_remaining_inputs_as_json() -> None:
    config = valid(demo_files())  # type: ignore[arg-type]
    request = render_tool_request(config.tools["cancel_plus"], {"email": "a@b.test"}, "t0k")
    assert request.method == "POST"
    assert request.url == "http://127.0.0.1:8000/demo-api/plus/cancel"
    assert request.json_body == {"email": "a@b.test"}
    assert request.headers["Authorization"] == "Bearer t0k"


def test_call_step_result_name_defaults_to_the_tool() -> None:
    config = valid(repo(procedures__p=procedure("- call: {tool: get_order, with: {id: '1'}}\n")))
    step = config.procedures["p"].steps[0]
    assert isinstance(step, CallStep)
    assert step.call.result_name == "get_order"


# --- the documentation ---------------------------------------------------------------------


def test_the_complete_example_in_the_reference_validates() -> None:
    """docs/config-reference.md's example repository must stay a valid configuration."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
    example = doc.read_text().split("## Complete example", 1)[1]
    blocks = re.findall(r"^`([\w/.]+\.yaml)`\n```yaml\n(.*?)^```", example, re.M | re.S)
    files = dict(blocks)
    assert set(files) == {
        "agent.yaml",
        "tags.yaml",
        "tools/lookup_order.yaml",
        "tools/cancel_plus.yaml",
        "procedures/order_status.yaml",
        "procedures/cancel_subscription.yaml",
    }
    config = valid(files)
    assert set(config.procedures) == {"order_status", "cancel_subscription"}
