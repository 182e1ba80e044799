"""Shared helpers for the agent evaluation runners: the question set and the demo knowledge base."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from helpline.agent.retrieval import Article

HERE = Path(__file__).resolve().parent
QUESTIONS_PATH = HERE / "questions.yaml"
KNOWLEDGE_DIR = HERE.parent.parent / "src" / "helpline" / "demo" / "knowledge"
HANDOFF = "handoff"


@dataclass(frozen=True)
class Question:
    """One evaluation question; expected is an article slug, None (decline) or "handoff"."""

    text: str
    expected: str | None

    @property
    def kind(self) -> str:
        """Return "in_scope", "out_of_scope" or "handoff"."""
        if self.expected is None:
            return "out_of_scope"
        return HANDOFF if self.expected == HANDOFF else "in_scope"


def load_questions(path: Path | str = QUESTIONS_PATH) -> list[Question]:
    """Load the evaluation questions from a YAML file."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return [Question(text=str(q["text"]), expected=q.get("expected")) for q in data["questions"]]


def load_articles(directory: Path | str = KNOWLEDGE_DIR) -> list[Article]:
    """Load `<slug>.md` articles whose first line is `# Title`."""
    articles = []
    for path in sorted(Path(directory).glob("*.md")):
        first, _, body = path.read_text(encoding="utf-8").partition("\n")
        articles.append(Article(slug=path.stem, title=first.lstrip("#").strip(), body=body.strip()))
    return articles
