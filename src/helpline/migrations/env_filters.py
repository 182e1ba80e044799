"""What Alembic compares: the service's tables, not procrastinate's own."""

from __future__ import annotations

from typing import Any


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Skip procrastinate's tables: their schema comes from procrastinate's own SQL."""
    return not (type_ == "table" and name is not None and name.startswith("procrastinate_"))
