"""A dulwich object store over the database, for the git protocol handlers.

dulwich's handlers are synchronous and run in a worker thread (see ``gitstore`` for the
design); this store fills dulwich's in-memory store on demand by running batched queries on
the request's event loop through a ``LoopBridge``.
"""

from __future__ import annotations

import asyncio
import stat
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Commit, ObjectID, RawObjectID, ShaFile, Tree
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.agentconfig.gitstore import chunks, hex_id, load_ancestors, load_objects

T = TypeVar("T")


class LoopBridge:
    """Lets dulwich's worker thread run a coroutine on the request's event loop and wait."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def run(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``factory()`` on the loop; must be called from another thread."""
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("LoopBridge.run called on the event loop thread (deadlock)")

        async def call() -> T:
            return await factory()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()


class ObjectSource(Protocol):
    """Where a ``LazyObjectStore`` reads missing objects from (synchronous calls)."""

    def objects(self, shas: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The stored objects among ``shas``."""
        ...

    def ancestors(self, sha: str) -> dict[str, tuple[int, bytes]]:
        """The object ``sha`` if stored and, for a commit, some of its ancestors."""
        ...


class SessionObjectSource:
    """An ``ObjectSource`` that queries the request's session through a ``LoopBridge``."""

    def __init__(self, bridge: LoopBridge, session: AsyncSession, team_id: str) -> None:
        self._bridge = bridge
        self._session = session
        self._team_id = team_id

    def objects(self, shas: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The stored objects among ``shas``."""
        return self._bridge.run(
            lambda: load_objects(session=self._session, team_id=self._team_id, shas=shas)
        )

    def ancestors(self, sha: str) -> dict[str, tuple[int, bytes]]:
        """A commit and up to ``HISTORY_READ_AHEAD`` of its ancestors."""
        return self._bridge.run(
            lambda: load_ancestors(session=self._session, team_id=self._team_id, sha=sha)
        )


class LazyObjectStore(MemoryObjectStore):
    """dulwich's in-memory object store, filled from the database as objects are asked for.

    Objects added by dulwich (a received pack) are kept in ``received`` for the caller to
    persist; ``max_received_bytes`` bounds their total inflated size.
    """

    def __init__(self, source: ObjectSource, *, max_received_bytes: int) -> None:
        super().__init__()
        self._source = source
        self._absent: set[ObjectID] = set()
        self.received: dict[ObjectID, ShaFile] = {}
        self._received_bytes = 0
        self._max_received_bytes = max_received_bytes

    def _remember(self, found: dict[str, tuple[int, bytes]]) -> list[ShaFile]:
        added = []
        for sha, (type_num, data) in found.items():
            oid = hex_id(sha)
            if oid not in self._data:
                obj = ShaFile.from_raw_string(type_num, data, sha=oid)
                self._data[oid] = obj
                added.append(obj)
        return added

    def prefetch(self, shas: Iterable[ObjectID]) -> list[ShaFile]:
        """Load every object among ``shas`` that is not in memory yet, in batched queries."""
        wanted = [s for s in dict.fromkeys(shas) if s not in self._data and s not in self._absent]
        added = []
        for chunk in chunks(wanted):
            added += self._remember(self._source.objects([s.decode("ascii") for s in chunk]))
            self._absent.update(s for s in chunk if s not in self._data)
        return added

    def _load_trees(self, loaded: list[ShaFile]) -> None:
        # The protocol reads every tree of every commit it walks: fetch them level by level
        # for a whole batch of commits (a few queries) rather than one query per tree.
        pending: list[ObjectID] = [obj.tree for obj in loaded if isinstance(obj, Commit)]
        trees = [obj for obj in loaded if isinstance(obj, Tree)]
        while pending or trees:
            trees += [obj for obj in self.prefetch(pending) if isinstance(obj, Tree)]
            pending = [
                entry.sha
                for tree in trees
                for entry in tree.iteritems()
                if entry.mode is not None and stat.S_ISDIR(entry.mode) and entry.sha is not None
            ]
            trees = []

    def _ensure(self, sha: ObjectID) -> bool:
        if sha in self._data:
            return True
        if sha in self._absent:
            return False
        # One recursive query returns the object and, for a commit, a slice of its history;
        # then their trees come in a few batched queries: the protocol's walks over parents
        # and trees then mostly hit memory.
        self._load_trees(self._remember(self._source.ancestors(sha.decode("ascii"))))
        if sha not in self._data:
            self._absent.add(sha)
            return False
        return True

    def contains_loose(self, sha: ObjectID | RawObjectID) -> bool:
        """Whether the object exists (in memory or in the database)."""
        return self._ensure(self._to_hexsha(sha))

    def __contains__(self, sha: ObjectID | RawObjectID) -> bool:
        return self.contains_loose(sha)

    def __getitem__(self, name: ObjectID | RawObjectID) -> ShaFile:
        sha = self._to_hexsha(name)
        if not self._ensure(sha):
            raise KeyError(sha)
        return super().__getitem__(sha)

    def iter_unpacked_subset(self, shas: Iterable[Any], **kwargs: Any) -> Any:
        """Batch-load the objects first: the pack writer asks for each one in turn."""
        wanted = [self._to_hexsha(s) for s in shas]
        self.prefetch(wanted)
        return super().iter_unpacked_subset(wanted, **kwargs)

    def iterobjects_subset(self, shas: Iterable[ObjectID], *, allow_missing: bool = False) -> Any:
        """Batch-load the objects first."""
        wanted = list(shas)
        self.prefetch(wanted)
        return super().iterobjects_subset(wanted, allow_missing=allow_missing)

    def add_object(self, obj: ShaFile) -> None:
        """Keep an object received from a client (persisted later by the request)."""
        if obj.id not in self.received:
            self._received_bytes += obj.raw_length()
            if self._received_bytes > self._max_received_bytes:
                raise PushTooLarge(
                    f"the pushed objects exceed {self._max_received_bytes} bytes once unpacked"
                )
            self.received[obj.id] = obj
        super().add_object(obj)


class PushTooLarge(OSError):
    """The objects of a push are larger than the limit (an OSError: dulwich reports it)."""
