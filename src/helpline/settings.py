"""Typed settings: one tree, read from the environment (prefix ``HELPLINE_``) once and passed in."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Process-wide configuration of a helpline node."""

    model_config = SettingsConfigDict(env_prefix="HELPLINE_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL (postgresql://user:pass@host:port/db). Unset: embedded server.",
    )
    data_dir: Path = Field(
        default=Path(".helpline"), description="Embedded database and demo files."
    )
    host: str = "127.0.0.1"
    port: int = 8000
    base_url: str | None = Field(
        default=None, description="Public API base address; default http://<host>:<port>."
    )
    chat_url: str | None = Field(
        default=None, description="Public address of the chat page; default the base URL."
    )
    run_worker: bool = Field(default=True, description="Run a job worker inside `serve`.")
    worker_concurrency: int = Field(default=4, ge=1, le=64)
    db_pool_size: int = Field(default=10, ge=1, le=200)
    idempotency_ttl_hours: int = Field(default=24, ge=1)
    conversation_idle_minutes: int = Field(
        default=30, ge=1, description="Close a conversation after this long without activity."
    )
    log_level: str = "INFO"
    log_json: bool = False

    def require_database_url(self) -> str:
        """The database URL; fails if it was never resolved (see ``db.resolve.database``)."""
        if self.database_url is None:
            raise RuntimeError("no database URL: start the embedded server or set one")
        return self.database_url

    def public_base_url(self) -> str:
        """The API base address clients should use."""
        return (self.base_url or f"http://{self.host}:{self.port}").rstrip("/")

    def public_chat_url(self) -> str:
        """The address that serves the embeddable chat page."""
        return (self.chat_url or self.public_base_url()).rstrip("/")
