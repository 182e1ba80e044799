"""Imports every model so that ``metadata`` describes the whole schema (Alembic, tests)."""

from __future__ import annotations

from helpline.agentconfig import models as agentconfig_models
from helpline.api import models as api_models
from helpline.conversations import models as conversation_models
from helpline.conversations import webhooks as webhook_models
from helpline.db.base import Base
from helpline.knowledge import models as knowledge_models
from helpline.teams import models as team_models
from helpline.versions import models as version_models

metadata = Base.metadata

__all__ = [
    "agentconfig_models",
    "api_models",
    "conversation_models",
    "knowledge_models",
    "metadata",
    "team_models",
    "version_models",
    "webhook_models",
]
