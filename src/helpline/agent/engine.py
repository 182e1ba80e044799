"""The built-in engine: procedures first, then the knowledge base, then the fallback.

One turn = one user message in, replies and audit entries out. The engine is deterministic
and offline; everything it needs (config, knowledge index, tool caller) is handed to it, and
its state between turns is plain JSON stored on the conversation.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from helpline.agent.procedures import (
    ProcedureState,
    StepEvent,
    ToolCaller,
    continue_procedure,
    start_procedure,
)
from helpline.agent.retrieval import KnowledgeIndex, TriggerMatcher, is_human_request
from helpline.agentconfig.schema import AgentConfig


@dataclass
class Reply:
    """A message the agent sends, with the knowledge articles it came from."""

    text: str
    sources: list[dict[str, str]] = field(default_factory=list)


@dataclass
class TurnResult:
    """Everything one user message produced."""

    replies: list[Reply] = field(default_factory=list)
    audit: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    handoff: dict[str, Any] | None = None  # {"destination", "reason"} when handing off
    resolved: bool = False
    tags: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedConfig:
    """A version's config with what the engine derives from it once."""

    config: AgentConfig
    matcher: TriggerMatcher
    tag_levels: dict[str, int]


class ConfigCache:
    """Versions are immutable: their parsed config and trigger index are kept per version id."""

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, LoadedConfig] = OrderedDict()

    def find(self, version_id: str) -> LoadedConfig | None:
        """The loaded config of a version if this node has it."""
        item = self._items.get(version_id)
        if item is not None:
            self._items.move_to_end(version_id)
        return item

    def store(self, version_id: str, config: AgentConfig) -> LoadedConfig:
        """Prepare and keep a version's config."""
        item = prepare(config)
        self._items[version_id] = item
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return item


def prepare(config: AgentConfig) -> LoadedConfig:
    """Build the trigger index and tag table of a config."""
    matcher = TriggerMatcher.build(
        {name: list(p.triggers) for name, p in config.procedures.items()}
    )
    return LoadedConfig(config, matcher, {tag.name: tag.level for tag in config.tags})


class BuiltinEngine:
    """Answers one user message with the loaded config, knowledge index and tool caller."""

    def __init__(
        self, loaded: LoadedConfig, knowledge: KnowledgeIndex | None, call_tool: ToolCaller
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.knowledge = knowledge
        self.call_tool = call_tool

    async def reply(
        self, *, state: dict[str, Any], text: str, metadata: dict[str, Any]
    ) -> TurnResult:
        """Run one turn from ``state`` (the previous turn's ``TurnResult.state``)."""
        result = TurnResult(state={"fallbacks": int(state.get("fallbacks", 0))})
        running = state.get("procedure")
        if is_human_request(text):
            if running:
                result.audit.append(("procedure abandoned",
                                     {"procedure": running.get("procedure"),
                                      "reason": "human_requested"}))
            self._handoff(result, reason="user_request")
            return result
        if running:
            procedure_state = ProcedureState.from_dict(running)
            new_state, events = await continue_procedure(
                self.config, procedure_state, text, call_tool=self.call_tool
            )
            self._apply(result, procedure_state.procedure, new_state, events)
            return result
        match = self.loaded.matcher.match(text)
        hit = self._knowledge_hit(text)
        # A procedure acts, so it needs the better claim: an article that answers the message
        # more confidently than the procedure's triggers resemble it wins.
        if match is not None and hit is not None and hit.score > match[1]:
            result.audit.append(("procedure skipped", {"procedure": match[0],
                                                       "score": round(match[1], 4),
                                                       "article": hit.slug}))
            match = None
        if match is not None:
            name, score = match
            result.audit.append(("procedure started", {"procedure": name,
                                                       "score": round(score, 4)}))
            result.tags.extend(self.config.procedures[name].tags)
            new_state, events = await start_procedure(
                self.config, name, call_tool=self.call_tool, user_text=text, metadata=metadata
            )
            self._apply(result, name, new_state, events)
            return result
        if hit is not None:
            source = {"slug": hit.slug, "title": hit.title}
            result.replies.append(Reply(hit.passage, [source]))
            result.audit.append(("knowledge answer", {**source, "score": round(hit.score, 4)}))
            result.state["fallbacks"] = 0
            return result
        self._fallback(result)
        return result

    def _knowledge_hit(self, text: str) -> Any:
        settings = self.config.agent.knowledge
        if not settings.enabled or self.knowledge is None:
            return None
        hits = self.knowledge.search(text, limit=1)
        if not hits:
            return None
        if settings.min_score is not None and hits[0].score < settings.min_score:
            return None
        return hits[0]

    def _fallback(self, result: TurnResult) -> None:
        fallbacks = result.state["fallbacks"] + 1
        result.state["fallbacks"] = fallbacks
        limit = self.config.agent.handoff.after_fallbacks
        result.audit.append(("fallback", {"fallbacks_in_a_row": fallbacks}))
        if limit and fallbacks >= limit:
            self._handoff(result, reason="repeated_fallback")
        else:
            result.replies.append(Reply(self.config.agent.fallback_message))

    def _handoff(self, result: TurnResult, *, reason: str, text: str | None = None) -> None:
        destination = self.config.agent.handoff.destination
        result.replies.append(Reply(text or self.config.agent.handoff_message))
        result.handoff = {"destination": destination, "reason": reason}
        result.state = {"fallbacks": 0}

    def _apply(
        self,
        result: TurnResult,
        procedure: str,
        new_state: ProcedureState | None,
        events: list[StepEvent],
    ) -> None:
        """Turn the runner's events into replies, audit entries and the next state."""
        for event in events:
            if event.kind in ("say", "ask") and event.text:
                result.replies.append(Reply(event.text))
            elif event.kind == "tool_call":
                result.audit.append(("tool call", {"procedure": procedure, **event.payload}))
            elif event.kind == "handoff":
                result.audit.append(("procedure handoff",
                                     {"procedure": procedure, **event.payload}))
                self._handoff(result, reason=str(event.payload.get("reason", "step")),
                              text=event.text)
            elif event.kind == "resolve":
                if event.text:
                    result.replies.append(Reply(event.text))
                result.resolved = True
                result.audit.append(("procedure resolved", {"procedure": procedure}))
        result.state["fallbacks"] = 0
        if new_state is not None and result.handoff is None:
            result.state["procedure"] = new_state.to_dict()
