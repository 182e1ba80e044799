"""The git smart protocol (upload-pack, receive-pack) over a team's stored repository.

dulwich's protocol handlers run in a worker thread over a ``LazyObjectStore`` and a snapshot
of the team's refs (see ``gitstore`` for why). Receive-pack is dulwich's handler with its
ref-update step replaced: the received objects and all ref changes are applied by
``apply_push`` on the request's session, which the HTTP route commits only after the whole
exchange succeeded and at least one ref moved.

Rules a push must follow (each failure is reported per ref, as git's own server does):
refs live under ``refs/heads/`` or ``refs/tags/``; a branch points at a commit and only moves
forward (``non-fast-forward`` otherwise; force pushes are refused, so published versions stay
reachable); ``main`` cannot be deleted; an existing tag is not moved; the client's idea of the
old value must still be true when the update lands (compare-and-swap); every object the pushed
objects point at must exist.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from dulwich.errors import ApplyDeltaError, ChecksumMismatch, GitProtocolError, HangupException
from dulwich.objects import Commit, ObjectFormatException, ObjectID, ShaFile
from dulwich.pack import UnresolvedDeltas
from dulwich.protocol import (
    CAPABILITY_ATOMIC,
    CAPABILITY_SIDE_BAND_64K,
    SIDE_BAND_CHANNEL_PROGRESS,
    ReceivableProtocol,
    pkt_line,
)
from dulwich.refs import DictRefsContainer, Ref, check_ref_format
from dulwich.repo import MemoryRepo
from dulwich.server import Backend, BackendRepo, Handler, ReceivePackHandler, UploadPackHandler
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.agentconfig import gitstore
from helpline.agentconfig.gitstore import BRANCH_PREFIX, DEFAULT_BRANCH, TAG_PREFIX, ZERO_SHA
from helpline.agentconfig.lazystore import LazyObjectStore, LoopBridge, SessionObjectSource
from helpline.agentconfig.models import MAX_REF_NAME
from helpline.agentconfig.schema import load_config
from helpline.agentconfig.service import read_tree_files
from helpline.errors import HelplineError

log = logging.getLogger(__name__)

UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"
SERVICES = (UPLOAD_PACK, RECEIVE_PACK)
MAX_UNPACKED_PUSH_BYTES = 256 * 1024 * 1024
HEAD_TARGET = (BRANCH_PREFIX + DEFAULT_BRANCH).encode()

_UNPACK_ERRORS = (
    OSError,
    ChecksumMismatch,
    ApplyDeltaError,
    AssertionError,
    socket.error,
    zlib.error,
    ObjectFormatException,
    UnresolvedDeltas,
    ValueError,
)


@dataclass(frozen=True)
class PushResult:
    """What receive-pack answered, and whether any ref moved (the caller then commits)."""

    body: bytes
    changed: bool


class _SingleRepoBackend(Backend):
    def __init__(self, repo: MemoryRepo) -> None:
        self._repo = repo

    def open_repository(self, path: str) -> BackendRepo:
        return self._repo  # type: ignore[return-value]  # a MemoryRepo is a BackendRepo


def _repository(
    store: LazyObjectStore, refs: dict[str, str], *, with_head: bool = True
) -> MemoryRepo:
    """A dulwich repository over the lazy store and a snapshot of the refs.

    HEAD is a symbolic ref to main (fetches learn the default branch from it); receive-pack
    does not list it, as git's own server does not.
    """
    repo = MemoryRepo()
    repo.object_store = store
    container = DictRefsContainer(
        {Ref(name.encode()): ObjectID(sha.encode()) for name, sha in refs.items()}
    )
    if with_head:
        container.set_symbolic_ref(Ref(b"HEAD"), Ref(HEAD_TARGET))
    repo.refs = container
    store.prefetch(gitstore.hex_id(sha) for sha in refs.values())  # tips, peeled for the list
    return repo


class _ReceivePack(ReceivePackHandler):
    """dulwich's receive-pack, with ref updates applied by ``apply_push`` (no hooks)."""

    apply: Callable[[list[ShaFile], list[tuple[str, str, str]], bool], list[tuple[str, str]]]
    describe: Callable[[str, str], list[str]]

    def _on_pre_receive(self, client_refs: Any) -> None:
        return None

    def _on_update(self, ref_name: Any, old_sha: Any, new_sha: Any) -> bytes | None:
        return None

    def _on_post_receive(self, client_refs: list[tuple[ObjectID, ObjectID, Ref]]) -> None:
        # Tell the pusher whether each updated branch holds a valid agent configuration
        # (git prints these lines as "remote: ..."); the push is accepted either way. Like a
        # hook's output, and unlike progress, this is sent even when the client asks for quiet.
        if not self.has_capability(CAPABILITY_SIDE_BAND_64K):
            return
        for _, new, ref in client_refs:
            if new == ZERO_SHA.encode() or not ref.startswith(BRANCH_PREFIX.encode()):
                continue
            for line in self.describe(ref.decode("utf-8", "replace"), new.decode()):
                self.proto.write_sideband(
                    SIDE_BAND_CHANNEL_PROGRESS, line.encode("utf-8", "replace") + b"\n"
                )

    def _apply_pack(
        self, refs: list[tuple[ObjectID, ObjectID, Ref]]
    ) -> Iterator[tuple[bytes, bytes]]:
        store = self.repo.object_store
        assert isinstance(store, LazyObjectStore)  # noqa: S101
        if any(new != ZERO_SHA.encode() for _, new, _ in refs):
            try:
                store.add_thin_pack(self.proto.read, getattr(self.proto, "recv", None))
            except _UNPACK_ERRORS as exc:
                if isinstance(exc, UnresolvedDeltas):
                    reason = "unresolved deltas: base objects missing"
                else:
                    reason = str(exc).replace("\n", " ") or type(exc).__name__
                yield b"unpack", reason.encode("utf-8", "replace")
                for _, _, ref in refs:
                    yield ref, b"unpacker error"
                return
        yield b"unpack", b"ok"
        commands = [
            (old.decode(), new.decode(), name.decode("utf-8", "surrogateescape"))
            for old, new, name in refs
        ]
        atomic = self.has_capability(CAPABILITY_ATOMIC)
        for ref_name, status in self.apply(list(store.received.values()), commands, atomic):
            yield ref_name.encode("utf-8", "surrogateescape"), status.encode()


def _run_handler(handler: Handler, out: BytesIO) -> bytes:
    try:
        handler.handle()
    except (GitProtocolError, HangupException) as exc:
        # The client prints "remote error: <message>" for an ERR line.
        return pkt_line(b"ERR " + str(exc).encode("utf-8", "replace"))
    return out.getvalue()


async def advertise(*, session: AsyncSession, team_id: str, service: str) -> bytes:
    """The ``info/refs?service=...`` answer: the service line, then the ref advertisement."""
    refs = await gitstore.read_refs(session=session, team_id=team_id)
    bridge = LoopBridge(asyncio.get_running_loop())
    source = SessionObjectSource(bridge, session, team_id)

    def run() -> bytes:
        store = LazyObjectStore(source, max_received_bytes=0)
        backend = _SingleRepoBackend(
            _repository(store, refs, with_head=service == UPLOAD_PACK)
        )
        out = BytesIO()
        proto = ReceivableProtocol(BytesIO().read, out.write)
        proto.write_pkt_line(f"# service={service}\n".encode())
        proto.write_pkt_line(None)
        handler_cls = UploadPackHandler if service == UPLOAD_PACK else _ReceivePack
        handler = handler_cls(backend, ["/"], proto, stateless_rpc=True, advertise_refs=True)
        return _run_handler(handler, out)

    return await asyncio.to_thread(run)


async def upload_pack(*, session: AsyncSession, team_id: str, request: bytes) -> bytes:
    """Answer a fetch/clone negotiation (``POST .../git-upload-pack``)."""
    refs = await gitstore.read_refs(session=session, team_id=team_id)
    bridge = LoopBridge(asyncio.get_running_loop())
    source = SessionObjectSource(bridge, session, team_id)

    def run() -> bytes:
        store = LazyObjectStore(source, max_received_bytes=0)
        backend = _SingleRepoBackend(_repository(store, refs))
        out = BytesIO()
        proto = ReceivableProtocol(BytesIO(request).read, out.write)
        handler = UploadPackHandler(backend, ["/"], proto, stateless_rpc=True)
        return _run_handler(handler, out)

    return await asyncio.to_thread(run)


async def receive_pack(*, session: AsyncSession, team_id: str, request: bytes) -> PushResult:
    """Answer a push (``POST .../git-receive-pack``); the caller commits when ``changed``."""
    refs = await gitstore.read_refs(session=session, team_id=team_id)
    bridge = LoopBridge(asyncio.get_running_loop())
    source = SessionObjectSource(bridge, session, team_id)
    statuses: list[tuple[str, str]] = []

    def apply(
        objects: list[ShaFile], commands: list[tuple[str, str, str]], atomic: bool
    ) -> list[tuple[str, str]]:
        result = bridge.run(
            lambda: apply_push(
                session=session, team_id=team_id, objects=objects, commands=commands,
                atomic=atomic,
            )
        )
        statuses.extend(result)
        return result

    def run() -> bytes:
        store = LazyObjectStore(source, max_received_bytes=MAX_UNPACKED_PUSH_BYTES)
        backend = _SingleRepoBackend(_repository(store, refs, with_head=False))
        out = BytesIO()
        proto = ReceivableProtocol(BytesIO(request).read, out.write)
        handler = _ReceivePack(backend, ["/"], proto, stateless_rpc=True)
        handler.apply = apply
        handler.describe = lambda ref, sha: bridge.run(
            lambda: validation_report(session=session, team_id=team_id, ref=ref, sha=sha)
        )
        return _run_handler(handler, out)

    body = await asyncio.to_thread(run)
    changed = any(status == "ok" for _, status in statuses)
    if statuses:
        log.info(
            "git push",
            extra={"action": "git_push", "team": team_id,
                   "refs": {ref: status for ref, status in statuses}},
        )
    return PushResult(body=body, changed=changed)


MAX_REPORTED_ERRORS = 20


async def validation_report(
    *, session: AsyncSession, team_id: str, ref: str, sha: str
) -> list[str]:
    """Lines telling whether the configuration at a pushed commit is valid, and why not."""
    branch = ref.removeprefix(BRANCH_PREFIX)
    try:
        files = await read_tree_files(session=session, team_id=team_id, commit_sha=sha)
    except HelplineError as exc:
        return [f"helpline: {branch} ({sha[:12]}): could not read the configuration: {exc}"]
    _, errors = load_config(files)
    if not errors:
        return [f"helpline: {branch} ({sha[:12]}): agent configuration is valid"]
    lines = [
        f"helpline: {branch} ({sha[:12]}): agent configuration is INVALID, it cannot be "
        f"published or simulated ({len(errors)} problem(s)):"
    ]
    lines += [f"helpline:   {error}" for error in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_REPORTED_ERRORS:
        lines.append(f"helpline:   ... and {len(errors) - MAX_REPORTED_ERRORS} more")
    return lines


def _ref_name_problem(ref: str) -> str | None:
    if not ref.startswith((BRANCH_PREFIX, TAG_PREFIX)):
        return "only refs/heads/* and refs/tags/* can be pushed"
    try:
        encoded = ref.encode("utf-8")
    except UnicodeEncodeError:
        return "funny refname"
    if len(encoded) > MAX_REF_NAME or not check_ref_format(Ref(encoded)):
        return "funny refname"
    return None


async def _update_problem(
    *, session: AsyncSession, team_id: str, old: str, new: str, ref: str,
    types: dict[str, int],
) -> str | None:
    """Why this ref update must be refused, or None."""
    problem = _ref_name_problem(ref)
    if problem:
        return problem
    if new == ZERO_SHA:
        if ref == BRANCH_PREFIX + DEFAULT_BRANCH:
            return "deletion of the current branch prohibited"
        return None
    if new not in types:
        return "missing necessary objects"
    if ref.startswith(BRANCH_PREFIX):
        if types[new] != Commit.type_num:
            return "a branch must point at a commit"
        if old != ZERO_SHA and not await gitstore.is_ancestor(
            session=session, team_id=team_id, ancestor=old, descendant=new
        ):
            return "non-fast-forward"
    elif old != ZERO_SHA and old != new:
        return "already exists"
    return None


async def apply_push(
    *,
    session: AsyncSession,
    team_id: str,
    objects: Sequence[ShaFile],
    commands: Sequence[tuple[str, str, str]],
    atomic: bool = False,
) -> list[tuple[str, str]]:
    """Store pushed objects and apply ref commands ``(old, new, ref)``; per-ref statuses.

    A status is ``"ok"`` or the reason the update was refused. With ``atomic`` either every
    command succeeds or none is applied.
    """
    received = {obj.id.decode("ascii"): obj for obj in objects}
    dangling = gitstore.missing_references(received.values()) - received.keys()
    if dangling - await gitstore.existing_shas(session=session, team_id=team_id, shas=dangling):
        return [(ref, "missing necessary objects") for _, _, ref in commands]
    await gitstore.store_objects(session=session, team_id=team_id, objects=received.values())

    tips = {new for _, new, _ in commands if new != ZERO_SHA}
    types = {sha: obj.type_num for sha, obj in received.items() if sha in tips}
    types.update(await gitstore.object_types(
        session=session, team_id=team_id, shas=tips - types.keys()
    ))
    problems = [
        await _update_problem(session=session, team_id=team_id, old=old, new=new, ref=ref,
                              types=types)
        for old, new, ref in commands
    ]
    if atomic and any(problems):
        return [(ref, problem or "atomic push failed")
                for (_, _, ref), problem in zip(commands, problems, strict=True)]

    savepoint = await session.begin_nested() if atomic else None
    statuses: list[tuple[str, str]] = []
    for (old, new, ref), problem in zip(commands, problems, strict=True):
        if problem is None:
            swapped = await gitstore.swap_ref(
                session=session, team_id=team_id, name=ref,
                old=None if old == ZERO_SHA else old, new=None if new == ZERO_SHA else new,
            )
            if not swapped:
                problem = "the ref changed during the push; fetch first"
        statuses.append((ref, problem or "ok"))
    if savepoint is not None:
        if all(status == "ok" for _, status in statuses):
            await savepoint.commit()
        else:
            await savepoint.rollback()
            statuses = [(ref, "atomic push failed" if status == "ok" else status)
                        for ref, status in statuses]
    return statuses
