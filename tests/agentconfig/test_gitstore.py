"""The repository store: objects, compare-and-swap refs, ancestry, history, push rules."""

from __future__ import annotations

import asyncio
import time

import pytest
from dulwich.objects import Blob, Commit, ShaFile, Tag, Tree

from helpline.agentconfig import gitserver, gitstore, service
from helpline.agentconfig.gitstore import ZERO_SHA, hex_id
from helpline.agentconfig.lazystore import LazyObjectStore, PushTooLarge
from helpline.db.engine import transaction

MAIN = "refs/heads/main"


def make_commit(files: dict[str, bytes], parents: list[Commit] | None = None,
                message: str = "m", when: int | None = None) -> list[ShaFile]:
    """A commit with a flat tree of ``files``; returns [blobs..., tree, commit]."""
    blobs = [Blob.from_string(data) for data in files.values()]
    tree = Tree()
    for name, blob in zip(files, blobs, strict=True):
        tree.add(name.encode(), 0o100644, blob.id)
    commit = Commit()
    commit.tree = tree.id
    commit.parents = [p.id for p in parents or []]
    commit.author = commit.committer = b"Test <t@example.com>"
    commit.author_time = commit.commit_time = when if when is not None else int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message.encode() + b"\n"
    return [*blobs, tree, commit]


def sha(obj: ShaFile) -> str:
    return obj.id.decode()


async def store(sessions, team_id: str, objects: list[ShaFile]) -> None:
    async with transaction(sessions) as session:
        await gitstore.store_objects(session=session, team_id=team_id, objects=objects)


async def test_objects_are_stored_once_and_only_visible_to_their_team(sessions, team, other_team):
    objects = make_commit({"agent.yaml": b"name: A\n"})
    await store(sessions, team.id, objects)
    await store(sessions, team.id, objects)  # same objects again: no error, no duplicate
    async with sessions() as session:
        mine = await gitstore.load_objects(
            session=session, team_id=team.id, shas=[sha(o) for o in objects]
        )
        theirs = await gitstore.load_objects(
            session=session, team_id=other_team.id, shas=[sha(o) for o in objects]
        )
    assert set(mine) == {sha(o) for o in objects}
    assert mine[sha(objects[0])] == (3, b"name: A\n")
    assert theirs == {}


async def test_swap_ref_is_compare_and_swap(sessions, team):
    first = make_commit({"a": b"1"})
    second = make_commit({"a": b"2"}, parents=[first[-1]])
    await store(sessions, team.id, first + second)
    a, b = sha(first[-1]), sha(second[-1])
    async with transaction(sessions) as session:
        assert await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                       old=None, new=a)
        # creating it again, or moving it from a value it does not have, does nothing
        assert not await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                           old=None, new=b)
        assert not await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                           old=b, new=a)
        assert await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN, old=a, new=b)
        assert await gitstore.read_refs(session=session, team_id=team.id) == {MAIN: b}
        assert not await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                           old=a, new=None)
        assert await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                       old=b, new=None)
        assert await gitstore.read_refs(session=session, team_id=team.id) == {}


async def test_concurrent_ref_updates_one_wins_the_other_is_refused(sessions, team):
    base = make_commit({"a": b"0"})
    left = make_commit({"a": b"left"}, parents=[base[-1]])
    right = make_commit({"a": b"right"}, parents=[base[-1]])
    await store(sessions, team.id, base + left + right)
    async with transaction(sessions) as session:
        await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN, old=None,
                                new=sha(base[-1]))

    first_moved = asyncio.Event()
    release_first = asyncio.Event()

    async def writer(target: str, hold: bool) -> bool:
        async with transaction(sessions) as session:
            swapped = await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                              old=sha(base[-1]), new=target)
            if hold:
                first_moved.set()
                await release_first.wait()
            return swapped

    first = asyncio.create_task(writer(sha(left[-1]), hold=True))
    await first_moved.wait()
    second = asyncio.create_task(writer(sha(right[-1]), hold=False))
    await asyncio.sleep(0.2)
    assert not second.done()  # blocked on the first transaction's row lock
    release_first.set()
    assert await first is True
    assert await second is False
    async with sessions() as session:
        refs = await gitstore.read_refs(session=session, team_id=team.id)
    assert refs == {MAIN: sha(left[-1])}


async def test_concurrent_branch_creation_one_wins(sessions, team):
    one = make_commit({"a": b"1"})
    two = make_commit({"a": b"2"})
    await store(sessions, team.id, one + two)

    async def create(target: str) -> bool:
        async with transaction(sessions) as session:
            swapped = await gitstore.swap_ref(session=session, team_id=team.id, name=MAIN,
                                              old=None, new=target)
            await asyncio.sleep(0.1)
            return swapped

    results = await asyncio.gather(create(sha(one[-1])), create(sha(two[-1])))
    assert sorted(results) == [False, True]


async def test_ancestry_and_generations_with_a_merge(sessions, team):
    root = make_commit({"a": b"0"}, when=1_000)
    left = make_commit({"a": b"l"}, parents=[root[-1]], when=2_000)
    right = make_commit({"b": b"r"}, parents=[root[-1]], when=3_000)
    merge = make_commit({"a": b"l", "b": b"r"}, parents=[left[-1], right[-1]], when=4_000)
    unrelated = make_commit({"z": b"z"}, when=5_000)
    # Stored in one batch, children listed before parents: generations are still right.
    await store(sessions, team.id, merge + right + left + root + unrelated)
    async with sessions() as session:
        async def anc(a, d):
            return await gitstore.is_ancestor(session=session, team_id=team.id,
                                              ancestor=sha(a[-1]), descendant=sha(d[-1]))
        assert await anc(root, merge) and await anc(left, merge) and await anc(right, merge)
        assert await anc(merge, merge)
        assert not await anc(merge, root)
        assert not await anc(left, right)
        assert not await anc(unrelated, merge)
        entries = await gitstore.history(session=session, team_id=team.id,
                                         head=sha(merge[-1]), limit=10)
        assert entries is not None
        order = [e.sha for e in entries]
        assert order == [sha(merge[-1]), sha(right[-1]), sha(left[-1]), sha(root[-1])]
        page = await gitstore.history(session=session, team_id=team.id, head=sha(merge[-1]),
                                      limit=10, after=sha(right[-1]))
        assert [e.sha for e in page or []] == order[2:]


async def test_history_of_a_long_chain_in_one_query(sessions, team):
    commits: list[list[ShaFile]] = []
    parent = None
    for i in range(300):
        objects = make_commit({"n": str(i).encode()}, parents=[parent] if parent else None,
                              when=1_000)  # same second: order must come from the graph
        commits.append(objects)
        parent = objects[-1]
    await store(sessions, team.id, [o for objects in commits for o in objects])
    async with sessions() as session:
        entries = await gitstore.history(session=session, team_id=team.id,
                                         head=sha(commits[-1][-1]), limit=300)
        assert [e.sha for e in entries or []] == [sha(c[-1]) for c in reversed(commits)]
        assert await gitstore.is_ancestor(session=session, team_id=team.id,
                                          ancestor=sha(commits[0][-1]),
                                          descendant=sha(commits[-1][-1]))


class CountingSource:
    """An ObjectSource over a dict, counting calls."""

    def __init__(self, objects: list[ShaFile], parents: dict[str, list[str]]) -> None:
        self.data = {sha(o): (o.type_num, o.as_raw_string()) for o in objects}
        self.parents = parents
        self.calls = 0

    def objects(self, shas):
        self.calls += 1
        return {s: self.data[s] for s in shas if s in self.data}

    def ancestors(self, start):
        self.calls += 1
        found, todo = {}, [start]
        while todo and len(found) < 256:
            current = todo.pop(0)
            if current in self.data and current not in found:
                found[current] = self.data[current]
                todo.extend(self.parents.get(current, []))
        return found


def test_lazy_store_reads_history_ahead_and_remembers_misses():
    chain: list[ShaFile] = []
    parents: dict[str, list[str]] = {}
    parent = None
    for i in range(50):
        objects = make_commit({"n": str(i).encode()}, parents=[parent] if parent else None)
        parents[sha(objects[-1])] = [sha(parent)] if parent else []
        chain.extend(objects)
        parent = objects[-1]
    source = CountingSource(chain, parents)
    store = LazyObjectStore(source, max_received_bytes=1024)
    head = hex_id(sha(chain[-1]))
    walked = 0
    current = store[head]
    while isinstance(current, Commit) and current.parents:
        assert isinstance(store[current.tree], Tree)
        current = store[current.parents[0]]
        walked += 1
    assert walked == 49
    # the whole chain came with the first commit, and all its trees in one more query
    assert source.calls == 2
    missing = hex_id("f" * 40)
    assert missing not in store
    assert missing not in store
    assert source.calls == 3
    with pytest.raises(KeyError):
        store[missing]


def test_lazy_store_bounds_received_objects():
    store = LazyObjectStore(CountingSource([], {}), max_received_bytes=10)
    store.add_object(Blob.from_string(b"small"))
    with pytest.raises(PushTooLarge):
        store.add_object(Blob.from_string(b"much too large for the limit"))


async def push(sessions, team_id, objects, commands, atomic=False):
    async with transaction(sessions) as session:
        return await gitserver.apply_push(session=session, team_id=team_id, objects=objects,
                                          commands=commands, atomic=atomic)


async def test_push_rules(sessions, team):
    first = make_commit({"a": b"1"})
    second = make_commit({"a": b"2"}, parents=[first[-1]])
    sideways = make_commit({"a": b"x"}, parents=[first[-1]])
    c1, c2, cx = sha(first[-1]), sha(second[-1]), sha(sideways[-1])
    assert await push(sessions, team.id, first, [(ZERO_SHA, c1, MAIN)]) == [(MAIN, "ok")]
    assert await push(sessions, team.id, second, [(c1, c2, MAIN)]) == [(MAIN, "ok")]
    # not a descendant of the current head: refused, even though the client names the old head
    assert await push(sessions, team.id, sideways, [(c2, cx, MAIN)]) == [
        (MAIN, "non-fast-forward")
    ]
    # the client's old value is stale: compare-and-swap refuses it
    assert await push(sessions, team.id, [], [(c1, c2, MAIN)]) == [
        (MAIN, "the ref changed during the push; fetch first")
    ]
    assert await push(sessions, team.id, [], [(c2, ZERO_SHA, MAIN)]) == [
        (MAIN, "deletion of the current branch prohibited")
    ]
    assert await push(sessions, team.id, [], [(ZERO_SHA, c1, "refs/heads/old")]) == [
        ("refs/heads/old", "ok")
    ]
    assert await push(sessions, team.id, [], [(c1, ZERO_SHA, "refs/heads/old")]) == [
        ("refs/heads/old", "ok")
    ]
    assert await push(sessions, team.id, [], [(ZERO_SHA, c1, "refs/notes/x")]) == [
        ("refs/notes/x", "only refs/heads/* and refs/tags/* can be pushed")
    ]
    assert await push(sessions, team.id, [], [(ZERO_SHA, c1, "refs/heads/a..b")]) == [
        ("refs/heads/a..b", "funny refname")
    ]
    blob = Blob.from_string(b"not a commit")
    assert await push(sessions, team.id, [blob], [(ZERO_SHA, sha(blob), "refs/heads/b")]) == [
        ("refs/heads/b", "a branch must point at a commit")
    ]
    tag = Tag()
    tag.object = (Commit, first[-1].id)
    tag.name = b"v1"
    tag.tagger = b"T <t@example.com>"
    tag.tag_time, tag.tag_timezone, tag.message = 1_000, 0, b"v1\n"
    assert await push(sessions, team.id, [tag], [(ZERO_SHA, sha(tag), "refs/tags/v1")]) == [
        ("refs/tags/v1", "ok")
    ]
    assert await push(sessions, team.id, [], [(sha(tag), c2, "refs/tags/v1")]) == [
        ("refs/tags/v1", "already exists")
    ]
    async with sessions() as session:
        assert await service.resolve_ref(session=session, team_id=team.id, ref="v1") == c1
        refs = await gitstore.read_refs(session=session, team_id=team.id)
    assert refs == {MAIN: c2, "refs/tags/v1": sha(tag)}


async def test_push_with_dangling_references_stores_nothing(sessions, team):
    base = make_commit({"a": b"1"})
    child = make_commit({"a": b"2"}, parents=[base[-1]])
    # the parent commit is neither pushed nor stored
    statuses = await push(sessions, team.id, child, [(ZERO_SHA, sha(child[-1]), MAIN)])
    assert statuses == [(MAIN, "missing necessary objects")]
    assert await push(sessions, team.id, [], [(ZERO_SHA, "a" * 40, MAIN)]) == [
        (MAIN, "missing necessary objects")
    ]


async def test_atomic_push_applies_all_or_nothing(sessions, team):
    first = make_commit({"a": b"1"})
    c1 = sha(first[-1])
    await push(sessions, team.id, first, [(ZERO_SHA, c1, MAIN)])
    statuses = await push(
        sessions, team.id, [],
        [(ZERO_SHA, c1, "refs/heads/x"), (c1, ZERO_SHA, MAIN)],
        atomic=True,
    )
    assert statuses == [("refs/heads/x", "atomic push failed"),
                        (MAIN, "deletion of the current branch prohibited")]
    # a compare-and-swap failure late in the list undoes the earlier updates
    statuses = await push(
        sessions, team.id, [],
        [(ZERO_SHA, c1, "refs/heads/y"), (ZERO_SHA, c1, MAIN)],
        atomic=True,
    )
    assert statuses == [("refs/heads/y", "atomic push failed"),
                        (MAIN, "the ref changed during the push; fetch first")]
    async with sessions() as session:
        assert await gitstore.read_refs(session=session, team_id=team.id) == {MAIN: c1}
