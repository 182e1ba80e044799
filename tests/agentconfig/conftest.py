"""Fixtures for the agent repository tests."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable

import pytest


@pytest.fixture(scope="session")
def demo_files() -> dict[str, str]:
    """The demo agent repository shipped with the package (a valid configuration)."""
    files: dict[str, str] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif not child.name.startswith("."):
                files[prefix + child.name] = child.read_text()

    walk(resources.files("helpline.demo") / "agent", "")
    return files
