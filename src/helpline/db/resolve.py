"""Find the database a command should use: the configured one, or the embedded server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from helpline.db import migrate
from helpline.db.embedded import EmbeddedPostgres
from helpline.settings import Settings


@contextlib.contextmanager
def database(settings: Settings, *, upgrade: bool = True) -> Iterator[Settings]:
    """Yield settings with ``database_url`` set, starting and later stopping the embedded server
    when none is configured; migrations are applied first unless ``upgrade`` is False."""
    embedded: EmbeddedPostgres | None = None
    if settings.database_url is None:
        embedded = EmbeddedPostgres(settings.data_dir)
        settings = settings.model_copy(update={"database_url": embedded.start()})
    try:
        if upgrade:
            migrate.upgrade(settings.require_database_url())
        yield settings
    finally:
        if embedded is not None:
            embedded.stop()
