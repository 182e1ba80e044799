"""Imports every model so that ``metadata`` describes the whole schema (Alembic, tests)."""

from __future__ import annotations

from helpline.api import models as api_models
from helpline.db.base import Base
from helpline.teams import models as team_models

metadata = Base.metadata

__all__ = ["api_models", "metadata", "team_models"]
