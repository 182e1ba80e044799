"""Git objects and refs of each team's agent repository, stored in PostgreSQL.

Two layers:

* **Async SQL functions** (``load_objects``, ``store_objects``, ``swap_ref``, ``is_ancestor``,
  ``history``...) used directly by the JSON authoring service and by the git protocol code.
  Every statement filters on ``team_id``. Ref updates are compare-and-swap statements
  (``UPDATE ... WHERE sha = :old``, ``INSERT ... ON CONFLICT DO NOTHING``,
  ``DELETE ... WHERE sha = :old``): under READ COMMITTED a second writer blocks on the row
  until the first commits, then re-checks the condition and matches nothing, so of two
  concurrent updates of one branch exactly one wins and the other is told so. Never a lost
  update, and no lock is held outside the writing transaction.

* **A dulwich object store for the smart-HTTP protocol** (``lazystore.LazyObjectStore``).
  dulwich is synchronous, our database access is async. Per request, the protocol handler
  runs in a worker thread (pack compression and delta resolution stay off the event loop) over
  dulwich's in-memory store, which fills itself on demand: a miss calls back into the event
  loop (``LoopBridge``) to run a batched SELECT on the request's session and waits for it.
  Reads ahead keep round trips low: a commit brings up to ``HISTORY_READ_AHEAD`` ancestors in
  one recursive query, a tree its sub-trees, and the pack writer asks for all blobs in
  batches. Objects received in a push stay in memory (``received``) until the request
  persists them and moves the refs in one transaction (see ``gitserver``). Nothing is written
  to local disk, so any node can serve any repository.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from dulwich.objects import Commit, ObjectID, ShaFile, Tree
from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.agentconfig.models import GitCommit, GitObject, GitRef

ZERO_SHA = "0" * 40
BRANCH_PREFIX = "refs/heads/"
TAG_PREFIX = "refs/tags/"
DEFAULT_BRANCH = "main"
CHUNK = 500  # objects per SELECT/INSERT batch
HISTORY_READ_AHEAD = 256  # ancestors fetched with a commit the protocol asks for

T = TypeVar("T")

# Commits reachable from :start through parents (UNION drops repeats, so merges are visited
# once). PostgreSQL evaluates a recursive query only as far as the outer query reads it, so a
# LIMIT or EXISTS stops the walk early. Each step looks its commit up through a LATERAL
# subquery with LIMIT 1: that pins the plan to one primary-key probe per commit (a plain join
# lets the planner, misled by stale statistics after a big push, hash the team's whole commit
# table at every step: 70x slower on 1,000 commits).
_ANCESTORS = text("""
WITH RECURSIVE walk(sha) AS (
    SELECT CAST(:start AS VARCHAR)
    UNION
    SELECT p.sha
    FROM walk
    CROSS JOIN LATERAL (
        SELECT c.parents FROM git_commits c
        WHERE c.team_id = :team AND c.sha = walk.sha
        LIMIT 1
    ) c
    CROSS JOIN LATERAL unnest(c.parents) AS p(sha)
)
SELECT o.sha, o.type, o.data
FROM (SELECT sha FROM walk LIMIT :limit) w
JOIN git_objects o ON o.team_id = :team AND o.sha = w.sha
""")
# Parents have a smaller generation than their children: below the target's generation the
# target cannot be found any more, so the walk stops there.
_IS_ANCESTOR = text("""
WITH RECURSIVE walk(sha) AS (
    SELECT CAST(:start AS VARCHAR)
    UNION
    SELECT p.sha
    FROM walk
    CROSS JOIN LATERAL (
        SELECT c.parents FROM git_commits c
        WHERE c.team_id = :team AND c.sha = walk.sha AND c.generation > :generation
        LIMIT 1
    ) c
    CROSS JOIN LATERAL unnest(c.parents) AS p(sha)
)
SELECT EXISTS (SELECT 1 FROM walk WHERE sha = :target)
""")
_HISTORY = text("""
WITH RECURSIVE walk(sha) AS (
    SELECT CAST(:start AS VARCHAR)
    UNION
    SELECT p.sha
    FROM walk
    CROSS JOIN LATERAL (
        SELECT c.parents FROM git_commits c
        WHERE c.team_id = :team AND c.sha = walk.sha
        LIMIT 1
    ) c
    CROSS JOIN LATERAL unnest(c.parents) AS p(sha)
)
SELECT c.sha, c.generation, c.committed_at, o.data
FROM walk
JOIN git_commits c ON c.team_id = :team AND c.sha = walk.sha
JOIN git_objects o ON o.team_id = :team AND o.sha = walk.sha
WHERE CAST(:after AS VARCHAR) IS NULL
   OR (c.generation, c.committed_at, c.sha) < (:generation, :committed_at, :after)
ORDER BY c.generation DESC, c.committed_at DESC, c.sha DESC
LIMIT :limit
""")


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def hex_id(sha: str) -> ObjectID:
    """A hex SHA as dulwich's object id type."""
    return ObjectID(sha.encode("ascii"))


# --- async SQL layer -------------------------------------------------------------------------


async def load_objects(
    *, session: AsyncSession, team_id: str, shas: Iterable[str]
) -> dict[str, tuple[int, bytes]]:
    """The objects among ``shas`` that exist: sha -> (type number, raw body)."""
    wanted = sorted(set(shas))
    found: dict[str, tuple[int, bytes]] = {}
    for chunk in chunks(wanted):
        rows = await session.execute(
            select(GitObject.sha, GitObject.type, GitObject.data).where(
                GitObject.team_id == team_id, GitObject.sha.in_(chunk)
            )
        )
        for sha, type_num, data in rows:
            found[sha] = (type_num, bytes(data))
    return found


async def load_ancestors(
    *, session: AsyncSession, team_id: str, sha: str, limit: int = HISTORY_READ_AHEAD
) -> dict[str, tuple[int, bytes]]:
    """Object ``sha`` if stored and, for a commit, up to ``limit`` - 1 ancestors, in one query."""
    rows = await session.execute(_ANCESTORS, {"start": sha, "team": team_id, "limit": limit})
    return {row.sha: (row.type, bytes(row.data)) for row in rows}


async def _value_by_sha(
    session: AsyncSession, team_id: str, shas: Iterable[str], model: Any, column: Any
) -> dict[str, Any]:
    """``column`` of the team's rows of ``model`` whose sha is among ``shas`` (chunked IN)."""
    found: dict[str, Any] = {}
    for chunk in chunks(sorted(set(shas))):
        rows = await session.execute(
            select(model.sha, column).where(model.team_id == team_id, model.sha.in_(chunk))
        )
        found.update({sha: value for sha, value in rows})
    return found


async def existing_shas(*, session: AsyncSession, team_id: str, shas: Iterable[str]) -> set[str]:
    """Which of ``shas`` are stored objects of the team."""
    return set(await object_types(session=session, team_id=team_id, shas=shas))


async def object_types(
    *, session: AsyncSession, team_id: str, shas: Iterable[str]
) -> dict[str, int]:
    """Type numbers of the stored objects among ``shas``."""
    return await _value_by_sha(session, team_id, shas, GitObject, GitObject.type)


async def _generations(
    *, session: AsyncSession, team_id: str, shas: Iterable[str]
) -> dict[str, int]:
    return await _value_by_sha(session, team_id, shas, GitCommit, GitCommit.generation)


def _commit_time(commit: Commit) -> datetime:
    return datetime.fromtimestamp(commit.commit_time, UTC)


async def store_objects(
    *, session: AsyncSession, team_id: str, objects: Iterable[ShaFile]
) -> None:
    """Insert objects (already present ones are skipped) and their commit-graph rows.

    Referenced objects must be stored already or be part of ``objects``: the repository
    never holds a commit whose tree or parents are missing (see ``missing_references``).
    """
    by_sha = {obj.id.decode("ascii"): obj for obj in objects}
    if not by_sha:
        return
    commits = {sha: obj for sha, obj in by_sha.items() if isinstance(obj, Commit)}
    outside = {
        parent.decode("ascii")
        for commit in commits.values()
        for parent in commit.parents
        if parent.decode("ascii") not in commits
    }
    generation = await _generations(session=session, team_id=team_id, shas=outside)

    # Iterative depth-first walk: a push may carry a long linear history.
    for sha in commits:
        stack = [sha]
        while stack:
            current = stack[-1]
            if current in generation:
                stack.pop()
                continue
            pending = [
                p.decode("ascii")
                for p in commits[current].parents
                if p.decode("ascii") in commits and p.decode("ascii") not in generation
            ]
            if pending:
                stack.extend(pending)
                continue
            parents = [p.decode("ascii") for p in commits[current].parents]
            generation[current] = 1 + max((generation.get(p, 0) for p in parents), default=0)
            stack.pop()

    object_rows = [
        {"team_id": team_id, "sha": sha, "type": obj.type_num, "data": obj.as_raw_string()}
        for sha, obj in by_sha.items()
    ]
    for chunk in chunks(object_rows):
        await session.execute(insert(GitObject).on_conflict_do_nothing(), list(chunk))
    commit_rows = [
        {
            "team_id": team_id,
            "sha": sha,
            "parents": [p.decode("ascii") for p in commit.parents],
            "generation": generation[sha],
            "committed_at": _commit_time(commit),
        }
        for sha, commit in commits.items()
    ]
    for chunk in chunks(commit_rows):
        await session.execute(insert(GitCommit).on_conflict_do_nothing(), list(chunk))


async def read_refs(*, session: AsyncSession, team_id: str) -> dict[str, str]:
    """All refs of the team's repository: full name -> sha."""
    rows = await session.execute(
        select(GitRef.name, GitRef.sha).where(GitRef.team_id == team_id).order_by(GitRef.name)
    )
    return {name: sha for name, sha in rows}


async def find_ref(*, session: AsyncSession, team_id: str, name: str) -> str | None:
    """The sha a full ref name points at, if the ref exists."""
    return (
        await session.execute(
            select(GitRef.sha).where(GitRef.team_id == team_id, GitRef.name == name)
        )
    ).scalar_one_or_none()


async def swap_ref(
    *, session: AsyncSession, team_id: str, name: str, old: str | None, new: str | None
) -> bool:
    """Move ref ``name`` from ``old`` to ``new`` (None = absent) if it is still at ``old``.

    True when this call made the change. A concurrent writer of the same ref waits for the
    other transaction and then sees its condition fail, so one of two racing updates loses.
    """
    if old is None and new is None:
        return False
    if old is None:
        statement: Any = (
            insert(GitRef)
            .values(team_id=team_id, name=name, sha=new)
            .on_conflict_do_nothing()
            .returning(GitRef.name)
        )
    elif new is None:
        statement = (
            delete(GitRef)
            .where(GitRef.team_id == team_id, GitRef.name == name, GitRef.sha == old)
            .returning(GitRef.name)
        )
    else:
        statement = (
            update(GitRef)
            .where(GitRef.team_id == team_id, GitRef.name == name, GitRef.sha == old)
            .values(sha=new)
            .returning(GitRef.name)
        )
    return (await session.execute(statement)).first() is not None


async def is_commit(*, session: AsyncSession, team_id: str, sha: str) -> bool:
    """Whether ``sha`` is a stored commit of the team."""
    found = await session.execute(
        select(GitCommit.sha).where(GitCommit.team_id == team_id, GitCommit.sha == sha)
    )
    return found.first() is not None


async def is_ancestor(
    *, session: AsyncSession, team_id: str, ancestor: str, descendant: str
) -> bool:
    """Whether commit ``ancestor`` is ``descendant`` or reachable from it through parents."""
    generation = (
        await session.execute(
            select(GitCommit.generation).where(
                GitCommit.team_id == team_id, GitCommit.sha == ancestor
            )
        )
    ).scalar_one_or_none()
    if generation is None:
        return False
    result = await session.execute(
        _IS_ANCESTOR,
        {"start": descendant, "team": team_id, "target": ancestor, "generation": generation},
    )
    return bool(result.scalar_one())


@dataclass(frozen=True)
class HistoryEntry:
    """A commit of a history walk, with its parsed object."""

    sha: str
    commit: Commit


async def history(
    *, session: AsyncSession, team_id: str, head: str, limit: int, after: str | None = None
) -> list[HistoryEntry] | None:
    """Commits reachable from ``head``, children before parents, newest first.

    ``after`` continues below a commit of an earlier page; None when ``after`` is not a
    commit of the team.
    """
    params: dict[str, Any] = {
        "start": head, "team": team_id, "limit": limit, "after": None, "generation": 0,
        "committed_at": datetime.now(UTC),
    }
    if after is not None:
        boundary = (
            await session.execute(
                select(GitCommit.generation, GitCommit.committed_at).where(
                    GitCommit.team_id == team_id, GitCommit.sha == after
                )
            )
        ).first()
        if boundary is None:
            return None
        params.update(
            after=after, generation=boundary.generation, committed_at=boundary.committed_at
        )
    rows = await session.execute(_HISTORY, params)
    entries = []
    for row in rows:
        commit = ShaFile.from_raw_string(Commit.type_num, bytes(row.data), sha=hex_id(row.sha))
        assert isinstance(commit, Commit)  # noqa: S101 - git_commits rows are commits
        entries.append(HistoryEntry(row.sha, commit))
    return entries


def missing_references(objects: Iterable[ShaFile]) -> set[str]:
    """SHAs that ``objects`` point at (trees, parents, tree entries, tag targets)."""
    from dulwich.objects import S_ISGITLINK, Tag

    referenced: set[str] = set()
    for obj in objects:
        if isinstance(obj, Commit):
            referenced.add(obj.tree.decode("ascii"))
            referenced.update(p.decode("ascii") for p in obj.parents)
        elif isinstance(obj, Tree):
            referenced.update(
                entry.sha.decode("ascii")
                for entry in obj.iteritems()
                if entry.mode is not None and not S_ISGITLINK(entry.mode) and entry.sha
            )
        elif isinstance(obj, Tag):
            referenced.add(obj.object[1].decode("ascii"))
    return referenced
