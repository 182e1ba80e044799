"""The agent repository as the rest of the service sees it: refs, history, files, commits.

Commits made here are ordinary git commits (author ``helpline <noreply@helpline.invalid>``),
visible to ``git fetch`` with the same SHAs. Functions only ``flush``; the caller commits.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dulwich.objects import Blob, Commit, ShaFile, Tag, Tree
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.agentconfig import gitstore
from helpline.agentconfig.gitstore import BRANCH_PREFIX, DEFAULT_BRANCH, TAG_PREFIX, hex_id
from helpline.agentconfig.models import MAX_REF_NAME
from helpline.agentconfig.schema import ConfigError, load_config
from helpline.errors import Conflict, InvalidRequest, NotFound

AUTHOR = b"helpline <noreply@helpline.invalid>"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
FILE_MODE = 0o100644
MAX_PATH = 1024
MAX_COMMIT_ATTEMPTS = 5
# An empty first commit would not change anything either (see ``create_commit``).
EMPTY_TREE_SHA = Tree().id.decode()


@dataclass(frozen=True)
class CommitInfo:
    """A commit as the API shows it."""

    sha: str
    message: str
    parents: list[str]
    author: str
    created_at: datetime


@dataclass(frozen=True)
class CommitResult:
    """A commit made by ``commit_files``: its SHA, branch and the parent it was made on."""

    sha: str
    branch: str
    parent_sha: str | None


@dataclass(frozen=True)
class Validation:
    """Whether a commit's files form a valid agent configuration, and the problems if not."""

    commit_sha: str
    errors: list[ConfigError]

    @property
    def valid(self) -> bool:
        return not self.errors


# --- names ----------------------------------------------------------------------------------


def check_branch_name(branch: str) -> str:
    """A short branch name git accepts (``main``, ``feature/x``); ValueError otherwise."""
    from dulwich.refs import Ref, check_ref_format

    full = (BRANCH_PREFIX + branch).encode()
    if not branch or branch.startswith("refs/") or len(full) > MAX_REF_NAME:
        raise ValueError(f"not a valid branch name: {branch!r}")
    if not check_ref_format(Ref(full)):
        raise ValueError(f"not a valid branch name: {branch!r}")
    return branch


def check_file_path(path: str) -> str:
    """A repository file path: relative, ``/``-separated, no empty, ``.``, ``..`` or ``.git``."""
    if not path or len(path) > MAX_PATH:
        raise ValueError(f"path must be 1-{MAX_PATH} characters")
    if path.startswith("/"):
        raise ValueError(f"path must be relative: {path!r}")
    if "\\" in path or "\x00" in path:
        raise ValueError(f"path must not contain a backslash or NUL: {path!r}")
    for segment in path.split("/"):
        if segment == "":
            raise ValueError(f"path has an empty segment: {path!r}")
        if segment in (".", ".."):
            raise ValueError(f"path must not contain '.' or '..' segments: {path!r}")
        if segment.lower() == ".git":
            raise ValueError(f"path must not contain a .git segment: {path!r}")
    return path


def _commit_info(sha: str, commit: Commit) -> CommitInfo:
    return CommitInfo(
        sha=sha,
        message=commit.message.decode("utf-8", "replace").rstrip("\n"),
        parents=[p.decode("ascii") for p in commit.parents],
        author=commit.author.decode("utf-8", "replace"),
        created_at=datetime.fromtimestamp(commit.commit_time, UTC),
    )


# --- reads ------------------------------------------------------------------------------------


async def _load(*, session: AsyncSession, team_id: str, sha: str) -> ShaFile | None:
    found = await gitstore.load_objects(session=session, team_id=team_id, shas=[sha])
    if sha not in found:
        return None
    type_num, data = found[sha]
    return ShaFile.from_raw_string(type_num, data, sha=hex_id(sha))


async def _peel_to_commit(*, session: AsyncSession, team_id: str, sha: str) -> str | None:
    for _ in range(10):  # tags of tags are rare; a cycle is impossible in a content hash
        obj = await _load(session=session, team_id=team_id, sha=sha)
        if isinstance(obj, Commit):
            return sha
        if not isinstance(obj, Tag):
            return None
        sha = obj.object[1].decode("ascii")
    return None


async def resolve_ref(*, session: AsyncSession, team_id: str, ref: str) -> str | None:
    """The commit SHA a branch name, tag name, full ref name or full commit SHA names."""
    if SHA_RE.match(ref) and await gitstore.is_commit(session=session, team_id=team_id, sha=ref):
        return ref
    candidates = [ref] if ref.startswith("refs/") else [BRANCH_PREFIX + ref, TAG_PREFIX + ref]
    for name in candidates:
        target = await gitstore.find_ref(session=session, team_id=team_id, name=name)
        if target is not None:
            return await _peel_to_commit(session=session, team_id=team_id, sha=target)
    return None


async def find_branch_head(*, session: AsyncSession, team_id: str, branch: str) -> str | None:
    """The commit a branch points at, or None when the branch does not exist."""
    return await gitstore.find_ref(session=session, team_id=team_id, name=BRANCH_PREFIX + branch)


async def is_ancestor_or_equal(
    *, session: AsyncSession, team_id: str, sha: str, branch: str = DEFAULT_BRANCH
) -> bool:
    """Whether commit ``sha`` is the head of ``branch`` or reachable from it."""
    head = await find_branch_head(session=session, team_id=team_id, branch=branch)
    if head is None:
        return False
    return await gitstore.is_ancestor(
        session=session, team_id=team_id, ancestor=sha, descendant=head
    )


async def get_commit_info(*, session: AsyncSession, team_id: str, sha: str) -> CommitInfo:
    """A commit of the team's repository; NotFound (``commit_not_found``) otherwise."""
    obj = await _load(session=session, team_id=team_id, sha=sha) if SHA_RE.match(sha) else None
    if not isinstance(obj, Commit):
        raise NotFound(f"no commit {sha} in the agent repository", code="commit_not_found")
    return _commit_info(sha, obj)


async def _tree_entries(
    *, session: AsyncSession, team_id: str, tree_sha: str
) -> dict[str, tuple[int, str]]:
    """Every non-tree entry under a tree, recursively: path -> (mode, sha). One query per level."""
    entries: dict[str, tuple[int, str]] = {}
    level = {"": tree_sha}
    while level:
        trees = await gitstore.load_objects(session=session, team_id=team_id, shas=level.values())
        next_level: dict[str, str] = {}
        for prefix, sha in level.items():
            if sha not in trees:
                raise NotFound(f"tree {sha} is missing", code="object_not_found")
            tree = ShaFile.from_raw_string(trees[sha][0], trees[sha][1], sha=hex_id(sha))
            if not isinstance(tree, Tree):
                raise NotFound(f"object {sha} is not a tree", code="object_not_found")
            for entry in tree.iteritems():
                assert entry.path is not None and entry.mode is not None  # noqa: S101
                assert entry.sha is not None  # noqa: S101
                path = prefix + entry.path.decode("utf-8", "surrogateescape")
                if stat.S_ISDIR(entry.mode):
                    next_level[path + "/"] = entry.sha.decode("ascii")
                else:
                    entries[path] = (entry.mode, entry.sha.decode("ascii"))
        level = next_level
    return entries


async def _commit_tree(*, session: AsyncSession, team_id: str, commit_sha: str) -> str:
    obj = await _load(session=session, team_id=team_id, sha=commit_sha)
    if not isinstance(obj, Commit):
        raise NotFound(f"no commit {commit_sha} in the agent repository", code="commit_not_found")
    return obj.tree.decode("ascii")


async def read_tree_files(
    *, session: AsyncSession, team_id: str, commit_sha: str
) -> dict[str, bytes]:
    """Every regular file of a commit's tree (recursive): path -> content.

    Symbolic links and submodules are not files of an agent configuration and are left out.
    """
    tree_sha = await _commit_tree(session=session, team_id=team_id, commit_sha=commit_sha)
    entries = await _tree_entries(session=session, team_id=team_id, tree_sha=tree_sha)
    files = {path: sha for path, (mode, sha) in entries.items() if stat.S_ISREG(mode)}
    blobs = await gitstore.load_objects(session=session, team_id=team_id, shas=files.values())
    return {path: blobs[sha][1] for path, sha in sorted(files.items())}


async def list_branches(*, session: AsyncSession, team_id: str) -> list[tuple[str, str]]:
    """Branches of the repository as (name, commit sha), by name."""
    refs = await gitstore.read_refs(session=session, team_id=team_id)
    return [
        (name.removeprefix(BRANCH_PREFIX), sha)
        for name, sha in refs.items()
        if name.startswith(BRANCH_PREFIX)
    ]


async def list_commits(
    *, session: AsyncSession, team_id: str, branch: str, limit: int, after: str | None = None
) -> tuple[list[CommitInfo], bool]:
    """A branch's history, newest first (children before parents); and whether more exist."""
    head = await find_branch_head(session=session, team_id=team_id, branch=branch)
    if head is None:
        raise NotFound(f"no branch {branch!r} in the agent repository", code="branch_not_found")
    entries = await gitstore.history(
        session=session, team_id=team_id, head=head, limit=limit + 1, after=after
    )
    if entries is None or (
        after is not None
        and not await gitstore.is_ancestor(
            session=session, team_id=team_id, ancestor=after, descendant=head
        )
    ):
        raise NotFound(f"commit {after} is not in the history of {branch!r}",
                       code="commit_not_found")
    infos = [_commit_info(entry.sha, entry.commit) for entry in entries]
    return infos[:limit], len(infos) > limit


async def read_ref_files(
    *, session: AsyncSession, team_id: str, ref: str
) -> tuple[str, dict[str, bytes]]:
    """The commit a ref names and its files; NotFound (``ref_not_found``) for an unknown ref."""
    sha = await resolve_ref(session=session, team_id=team_id, ref=ref)
    if sha is None:
        raise NotFound(f"no branch, tag or commit {ref!r} in the agent repository",
                       code="ref_not_found")
    return sha, await read_tree_files(session=session, team_id=team_id, commit_sha=sha)


async def validate_ref(*, session: AsyncSession, team_id: str, ref: str) -> Validation:
    """Validate the configuration at a ref with the agent config schema."""
    sha, files = await read_ref_files(session=session, team_id=team_id, ref=ref)
    _, errors = load_config(files)
    return Validation(commit_sha=sha, errors=errors)


# --- writes -----------------------------------------------------------------------------------


def _apply_changes(
    entries: dict[str, tuple[int, str]],
    files: Mapping[str, str | bytes | None],
    *,
    replace_all: bool,
) -> tuple[dict[str, tuple[int, str]], list[Blob]]:
    """New flat tree entries and the blobs to store."""
    result = {} if replace_all else dict(entries)
    blobs: list[Blob] = []
    for path, content in files.items():
        if content is None:
            if replace_all:
                continue
            if path not in result:
                raise InvalidRequest(f"cannot delete {path!r}: no such file",
                                     code="no_such_file")
            del result[path]
            continue
        blob = Blob.from_string(content.encode() if isinstance(content, str) else content)
        blobs.append(blob)
        mode = entries[path][0] if path in entries and stat.S_ISREG(entries[path][0]) else FILE_MODE
        result[path] = (mode, blob.id.decode("ascii"))
    for path in result:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in result:
                raise InvalidRequest(
                    f"{path!r} needs {prefix!r} to be a directory, but it is a file",
                    code="path_conflict",
                )
    return result, blobs


def _build_trees(entries: dict[str, tuple[int, str]]) -> tuple[str, list[Tree]]:
    """Trees for flat entries, bottom-up: the root tree's sha and every tree object."""
    children: dict[str, dict[str, tuple[int, str]]] = {"": {}}
    for path, entry in entries.items():
        parent, _, name = path.rpartition("/")
        children.setdefault(parent, {})[name] = entry
        while parent:  # make sure every ancestor directory exists
            grandparent, _, dirname = parent.rpartition("/")
            children.setdefault(grandparent, {}).setdefault(dirname, (stat.S_IFDIR, ""))
            children.setdefault(parent, {})
            parent = grandparent
    trees: list[Tree] = []
    shas: dict[str, str] = {}
    for directory in sorted(children, key=lambda d: d.count("/") + (d != ""), reverse=True):
        tree = Tree()
        for name, (mode, sha) in children[directory].items():
            if mode == stat.S_IFDIR:
                sha = shas[f"{directory}/{name}" if directory else name]
            tree.add(name.encode("utf-8", "surrogateescape"), mode, hex_id(sha))
        shas[directory] = tree.id.decode("ascii")
        trees.append(tree)
    return shas[""], trees


async def commit_files(
    *,
    session: AsyncSession,
    team_id: str,
    branch: str,
    message: str,
    files: Mapping[str, str | bytes | None],
    parent_sha: str | None = None,
    replace_all: bool = False,
) -> CommitResult:
    """Commit file changes to a branch; see ``create_commit``."""
    try:
        check_branch_name(branch)
    except ValueError as exc:
        raise InvalidRequest(str(exc), code="invalid_branch") from exc
    try:
        for path in files:
            check_file_path(path)
    except ValueError as exc:
        raise InvalidRequest(str(exc), code="invalid_path") from exc
    if not message.strip():
        raise InvalidRequest("the commit message must not be empty", code="invalid_message")
    ref = BRANCH_PREFIX + branch
    for _ in range(MAX_COMMIT_ATTEMPTS):
        head = await gitstore.find_ref(session=session, team_id=team_id, name=ref)
        if parent_sha is not None:
            if head is not None and head != parent_sha:
                raise Conflict(
                    f"branch {branch!r} has moved: its head is {head}, not {parent_sha}",
                    code="branch_moved",
                    details={"branch": branch, "head_sha": head},
                )
            base: str | None = parent_sha
        elif head is not None or branch == DEFAULT_BRANCH:
            base = head
        else:  # a new branch starts from main (or as the first commit of the repository)
            base = await find_branch_head(session=session, team_id=team_id, branch=DEFAULT_BRANCH)
        base_tree = (
            await _commit_tree(session=session, team_id=team_id, commit_sha=base)
            if base else EMPTY_TREE_SHA
        )
        entries = (
            await _tree_entries(session=session, team_id=team_id, tree_sha=base_tree)
            if base else {}
        )
        new_entries, blobs = _apply_changes(entries, files, replace_all=replace_all)
        tree_sha, trees = _build_trees(new_entries)
        if tree_sha == base_tree:
            raise InvalidRequest(
                f"nothing to commit: the files are unchanged on {branch!r}",
                code="no_changes",
                details={"commit_sha": base},
            )
        commit = Commit()
        commit.tree = hex_id(tree_sha)
        commit.parents = [hex_id(base)] if base else []
        commit.author = commit.committer = AUTHOR
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode() + (b"" if message.endswith("\n") else b"\n")
        sha = commit.id.decode("ascii")
        # The ref moves first: if another writer got there first nothing has been written.
        if await gitstore.swap_ref(session=session, team_id=team_id, name=ref, old=head, new=sha):
            await gitstore.store_objects(
                session=session, team_id=team_id, objects=[*blobs, *trees, commit]
            )
            await session.flush()
            return CommitResult(sha=sha, branch=branch, parent_sha=base)
        if parent_sha is not None:
            current = await gitstore.find_ref(session=session, team_id=team_id, name=ref)
            raise Conflict(
                f"branch {branch!r} has moved: its head is {current}, not {parent_sha}",
                code="branch_moved",
                details={"branch": branch, "head_sha": current},
            )
    raise Conflict(f"branch {branch!r} keeps moving; retry the commit", code="branch_moved")


async def create_commit(
    *,
    session: AsyncSession,
    team_id: str,
    branch: str,
    message: str,
    files: Mapping[str, str | bytes | None],
    parent_sha: str | None = None,
    replace_all: bool = False,
) -> str:
    """Commit ``files`` (path -> content; None deletes) to ``branch`` and return the SHA.

    ``parent_sha`` given: the branch must be at that commit (409 ``branch_moved`` otherwise),
    or, for a branch that does not exist yet, the new branch starts from it (404
    ``commit_not_found`` if it is not a commit). Omitted: the
    commit goes on top of the branch head; a new branch starts from ``main``'s head (or is the
    repository's first commit). ``replace_all`` makes the tree exactly ``files``. A commit
    that would not change the tree is refused (422 ``no_changes``). Flushes only.
    """
    result = await commit_files(
        session=session, team_id=team_id, branch=branch, message=message, files=files,
        parent_sha=parent_sha, replace_all=replace_all,
    )
    return result.sha


def read_directory(root: Path) -> dict[str, bytes]:
    """A local folder's regular files as repository paths -> content (``.git`` is skipped).

    Symbolic links are not followed. ValueError for a file name a repository cannot hold.
    """
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    files: dict[str, bytes] = {}
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d.lower() != ".git")
        for name in sorted(names):
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(root).as_posix()
            files[check_file_path(relative)] = path.read_bytes()
    return files
