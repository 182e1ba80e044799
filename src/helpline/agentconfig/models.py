"""Each team's agent repository, in PostgreSQL: git objects, refs and a commit-graph index.

``git_objects`` holds every object exactly as git hashes it (type + raw body, no header), so a
SHA computed by any git client is the primary key. ``git_commits`` repeats what a walk over
history needs (parents, commit time, generation number), like git's own commit-graph file:
ancestry and history queries run as one recursive SQL statement instead of one round trip
per commit. ``git_refs`` maps full ref names (``refs/heads/main``) to commit SHAs; it is the
only mutable table and is updated with compare-and-swap statements.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, LargeBinary, SmallInteger, String
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from helpline.db.base import Base

SHA_LENGTH = 40
MAX_REF_NAME = 255


def _team_key() -> Mapped[str]:
    # First column of each primary key: that index already serves per-team lookups.
    return mapped_column(
        String(40), ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True
    )


class GitObject(Base):
    """A git object (commit 1, tree 2, blob 3, tag 4) of a team's repository."""

    __tablename__ = "git_objects"

    team_id: Mapped[str] = _team_key()
    sha: Mapped[str] = mapped_column(String(SHA_LENGTH), primary_key=True)
    type: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class GitCommit(Base):
    """Commit-graph row of a commit object: parents, commit time and generation number.

    ``generation`` is 1 for a root commit, else 1 + the largest generation of its parents, so
    a commit always sorts after its ancestors and a walk can stop below a target's generation.
    """

    __tablename__ = "git_commits"

    team_id: Mapped[str] = _team_key()
    sha: Mapped[str] = mapped_column(String(SHA_LENGTH), primary_key=True)
    parents: Mapped[list[str]] = mapped_column(ARRAY(String(SHA_LENGTH)), nullable=False)
    generation: Mapped[int] = mapped_column(Integer, nullable=False)
    committed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class GitRef(Base):
    """A ref (``refs/heads/<branch>``, ``refs/tags/<tag>``) of a team's repository."""

    __tablename__ = "git_refs"

    team_id: Mapped[str] = _team_key()
    name: Mapped[str] = mapped_column(String(MAX_REF_NAME), primary_key=True)
    sha: Mapped[str] = mapped_column(String(SHA_LENGTH), nullable=False)
