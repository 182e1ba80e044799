"""The documentation keeps up with the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_error_code_is_listed_in_docs_errors():
    source = "\n".join(p.read_text() for p in (ROOT / "src" / "helpline").rglob("*.py"))
    codes = set(re.findall(r'code="([a-z_]+)"', source))
    codes |= set(re.findall(r'^\s+code = "([a-z_]+)"', source, re.MULTILINE))
    documented = set(re.findall(r"`([a-z_]+)`", (ROOT / "docs" / "errors.md").read_text()))
    assert sorted(codes - documented) == []
