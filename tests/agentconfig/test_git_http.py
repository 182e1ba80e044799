"""git smart HTTP end to end: the real ``git`` against a live server on a loopback port."""

from __future__ import annotations

import gzip
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from helpline.api.app import create_app
from helpline.settings import Settings

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = "/v1/agent-config/repo.git"


@pytest.fixture(scope="module")
def git_binary() -> str:
    found = shutil.which("git")
    if found is None:
        if IN_CI:
            pytest.fail("CI=true but the git command is missing: these tests must run in CI")
        pytest.skip("git is not installed")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real HTTP server (uvicorn in a thread) on the test database."""
    port = _free_port()
    settings = Settings(database_url=database_url, data_dir=tmp_path_factory.mktemp("data"),
                        run_worker=False, host="127.0.0.1", port=port)
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not runner.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the test server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    runner.should_exit = True
    thread.join(timeout=10)


class Git:
    """Runs the real git with an isolated configuration."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
            "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com",
            "LC_ALL": "C",
        }

    def run(self, *args: str, cwd: Path | None = None, check: bool = True,
            key: str | None = None) -> subprocess.CompletedProcess[str]:
        prefix = ["-c", "init.defaultBranch=main"]
        if key is not None:
            prefix += ["-c", f"http.extraHeader=Authorization: Bearer {key}"]
        result = subprocess.run(
            [self.binary, *prefix, *args], cwd=cwd, env=self.env, capture_output=True,
            text=True, timeout=60, check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result

    def out(self, *args: str, cwd: Path) -> str:
        return self.run(*args, cwd=cwd).stdout.strip()


@pytest.fixture
def git(git_binary: str, tmp_path: Path) -> Git:
    home = tmp_path / "home"
    home.mkdir()
    return Git(git_binary, home)


def commit_file(git: Git, repo: Path, name: str, text: str, message: str) -> str:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git.run("add", name, cwd=repo)
    git.run("commit", "-q", "-m", message, cwd=repo)
    return git.out("rev-parse", "HEAD", cwd=repo)


def basic_url(server: str, key: str) -> str:
    return server.replace("http://", f"http://x:{key}@") + REPO


async def test_clone_empty_push_and_read_back_over_json(server, git, team, tmp_path):
    url = server + REPO
    clone = tmp_path / "clone"
    result = git.run("clone", url, str(clone), key=team.api_key)
    assert "empty repository" in result.stderr
    sha = commit_file(git, clone, "agent.yaml", "name: Pushed\nbogus: 1\n", "first")
    pushed = git.run("push", "origin", "HEAD:main", cwd=clone, key=team.api_key)
    # stored although it is not a valid configuration; the pusher is told why
    assert "remote: helpline: main" in pushed.stderr and "INVALID" in pushed.stderr
    assert "agent.yaml" in pushed.stderr

    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        branches = (await client.get("/v1/agent-config/branches")).json()
        assert branches == {"data": [{"name": "main", "commit_sha": sha}]}
        files = (await client.get("/v1/agent-config/files?ref=main")).json()
        assert files["files"] == {"agent.yaml": "name: Pushed\nbogus: 1\n"}
        history = (await client.get("/v1/agent-config/commits")).json()["data"]
        assert history[0]["author"] == "Dev <dev@example.com>"
        assert history[0]["message"] == "first"

    # a second clone gets main checked out (HEAD points at it)
    again = tmp_path / "again"
    git.run("clone", url, str(again), key=team.api_key)
    assert (again / "agent.yaml").read_text() == "name: Pushed\nbogus: 1\n"
    assert git.out("rev-parse", "HEAD", cwd=again) == sha


async def test_json_commit_is_fetched_with_the_same_sha_and_back(server, git, team, tmp_path,
                                                                 demo_files):
    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        made = (await client.post("/v1/agent-config/commits", json={
            "branch": "main", "message": "from json",
            "files": {"agent.yaml": "name: Json\n", "procedures/hello.yaml": "x: 1\n"},
        })).json()
        clone = tmp_path / "clone"
        git.run("clone", basic_url(server, team.api_key), str(clone))
        assert git.out("rev-parse", "HEAD", cwd=clone) == made["commit_sha"]
        assert git.out("log", "-1", "--format=%an <%ae>|%s", cwd=clone) == (
            "helpline <noreply@helpline.invalid>|from json"
        )
        assert (clone / "procedures" / "hello.yaml").read_text() == "x: 1\n"
        # git fsck accepts what the JSON API built
        git.run("fsck", "--strict", cwd=clone)

        later = (await client.post("/v1/agent-config/commits", json={
            "branch": "main", "message": "second json", "parent_sha": made["commit_sha"],
            "files": {"procedures/hello.yaml": None},
        })).json()
        git.run("fetch", "-q", "origin", cwd=clone)
        assert git.out("rev-parse", "origin/main", cwd=clone) == later["commit_sha"]

        git.run("merge", "-q", "--ff-only", "origin/main", cwd=clone)
        pushed = commit_file(git, clone, "tags.yaml", "[]\n", "from git")
        git.run("push", "-q", "origin", "main", cwd=clone)
        for path, text in demo_files.items():
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            (clone / path).write_text(text)
        git.run("add", "-A", cwd=clone)
        git.run("commit", "-q", "-m", "demo agent", cwd=clone)
        valid = git.run("push", "origin", "HEAD:refs/heads/demo", cwd=clone)
        assert "agent configuration is valid" in valid.stderr
        on_top = (await client.post("/v1/agent-config/commits", json={
            "branch": "main", "message": "json on git", "files": {"a.txt": "a"},
            "parent_sha": pushed,
        }))
        assert on_top.status_code == 201, on_top.text


async def test_non_fast_forward_push_is_rejected(server, git, team, tmp_path):
    url = server + REPO
    first, second = tmp_path / "first", tmp_path / "second"
    git.run("clone", url, str(first), key=team.api_key)
    commit_file(git, first, "a.txt", "base\n", "base")
    git.run("push", "origin", "HEAD:main", cwd=first, key=team.api_key)
    git.run("clone", url, str(second), key=team.api_key)
    ahead = commit_file(git, first, "a.txt", "first\n", "first moves main")
    git.run("push", "origin", "main", cwd=first, key=team.api_key)

    commit_file(git, second, "a.txt", "second\n", "second diverges")
    git.run("fetch", "origin", cwd=second, key=team.api_key)
    plain = git.run("push", "origin", "main", cwd=second, key=team.api_key, check=False)
    assert plain.returncode != 0
    assert "rejected" in plain.stderr and "non-fast-forward" in plain.stderr
    # a forced push is refused by the server itself
    forced = git.run("push", "--force", "origin", "main", cwd=second, key=team.api_key,
                     check=False)
    assert forced.returncode != 0
    assert "remote rejected" in forced.stderr and "non-fast-forward" in forced.stderr
    remote = git.run("ls-remote", url, "refs/heads/main", key=team.api_key).stdout
    assert remote.split()[0] == ahead


async def test_branches_create_delete_and_main_cannot_be_deleted(server, git, team, tmp_path):
    url = server + REPO
    clone = tmp_path / "clone"
    git.run("clone", url, str(clone), key=team.api_key)
    commit_file(git, clone, "a.txt", "a\n", "a")
    git.run("push", "origin", "HEAD:main", cwd=clone, key=team.api_key)
    git.run("checkout", "-q", "-b", "feature", cwd=clone)
    feature = commit_file(git, clone, "b.txt", "b\n", "b")
    git.run("push", "origin", "feature", "--atomic", cwd=clone, key=team.api_key)
    git.run("tag", "-a", "v1", "-m", "v1", cwd=clone)
    git.run("push", "origin", "v1", cwd=clone, key=team.api_key)
    refs = git.run("ls-remote", url, key=team.api_key).stdout
    assert f"{feature}\trefs/heads/feature" in refs
    assert "refs/tags/v1^{}" in refs  # annotated tag, peeled in the advertisement
    assert "\tHEAD" in refs

    git.run("push", "origin", "--delete", "feature", cwd=clone, key=team.api_key)
    refs = git.run("ls-remote", url, key=team.api_key).stdout
    assert "refs/heads/feature" not in refs
    deleted = git.run("push", "origin", "--delete", "main", cwd=clone, key=team.api_key,
                      check=False)
    assert deleted.returncode != 0
    assert "deletion of the current branch prohibited" in deleted.stderr


async def test_large_push_and_fetch(server, git, team, tmp_path):
    """Bigger than git's 1 MiB post buffer: chunked upload after an auth probe."""
    url = server + REPO
    clone = tmp_path / "clone"
    git.run("clone", url, str(clone), key=team.api_key)
    (clone / "big.bin").write_bytes(secrets.token_bytes(3 * 1024 * 1024))
    git.run("add", "big.bin", cwd=clone)
    git.run("commit", "-q", "-m", "big", cwd=clone)
    for i in range(30):
        commit_file(git, clone, f"procedures/p{i}.yaml", f"n: {i}\n", f"commit {i}")
    head = git.out("rev-parse", "HEAD", cwd=clone)
    git.run("push", "origin", "HEAD:main", cwd=clone, key=team.api_key)
    copy = tmp_path / "copy"
    git.run("clone", url, str(copy), key=team.api_key)
    assert git.out("rev-parse", "HEAD", cwd=copy) == head
    assert (copy / "big.bin").read_bytes() == (clone / "big.bin").read_bytes()
    assert git.out("rev-list", "--count", "HEAD", cwd=copy) == "31"


async def test_auth_styles_and_tenant_isolation(server, git, team, other_team, tmp_path):
    clone = tmp_path / "clone"
    git.run("clone", basic_url(server, team.api_key), str(clone))
    secret = commit_file(git, clone, "agent.yaml", "name: Secret\n", "secret")
    git.run("push", "origin", "HEAD:main", cwd=clone)

    wrong = git.run("clone", basic_url(server, "hl_wrong"), str(tmp_path / "wrong"), check=False)
    assert wrong.returncode != 0
    assert "Authentication failed" in wrong.stderr or "401" in wrong.stderr
    anonymous = git.run("clone", server + REPO, str(tmp_path / "anon"), check=False)
    assert anonymous.returncode != 0

    theirs = tmp_path / "theirs"
    result = git.run("clone", server + REPO, str(theirs), key=other_team.api_key)
    assert "empty repository" in result.stderr
    fetch_secret = git.run("fetch", "origin", secret, cwd=theirs, key=other_team.api_key,
                           check=False)
    assert fetch_secret.returncode != 0

    async with httpx.AsyncClient(base_url=server) as client:
        for headers in ({}, {"Authorization": "Bearer hl_wrong"},
                        {"Authorization": "Basic !!notbase64"}):
            response = await client.get(f"{REPO}/info/refs?service=git-upload-pack",
                                        headers=headers)
            assert response.status_code == 401
            assert response.headers["WWW-Authenticate"] == 'Basic realm="helpline"'
            assert response.json()["error"]["code"] == "unauthorized"
        ok = await client.get(f"{REPO}/info/refs?service=git-upload-pack",
                              auth=("anything", team.api_key))
        assert ok.status_code == 200
        assert ok.headers["content-type"] == "application/x-git-upload-pack-advertisement"
        assert secret.encode() in ok.content
        other = await client.get(f"{REPO}/info/refs?service=git-upload-pack",
                                 headers=other_team.headers)
        assert secret.encode() not in other.content


async def test_protocol_details(server, git, team, tmp_path):
    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        made = (await client.post("/v1/agent-config/commits", json={
            "branch": "main", "message": "m", "files": {"a.txt": "a"},
        })).json()
        dumb = await client.get(f"{REPO}/info/refs")
        assert dumb.status_code == 403
        wrong_type = await client.post(f"{REPO}/git-upload-pack", content=b"0000",
                                       headers={"Content-Type": "application/json"})
        assert wrong_type.status_code == 415

        # git gzips large upload-pack requests; a gzip body is decoded
        want = f"want {made['commit_sha']} side-band-64k ofs-delta thin-pack\n".encode()
        request = (f"{len(want) + 4:04x}".encode() + want + b"0000" + b"0009done\n")
        response = await client.post(
            f"{REPO}/git-upload-pack", content=gzip.compress(request),
            headers={"Content-Type": "application/x-git-upload-pack-request",
                     "Content-Encoding": "gzip"},
        )
        assert response.status_code == 200
        assert b"PACK" in response.content

        too_big = await client.post(
            f"{REPO}/git-receive-pack", content=b"0" * (33 * 1024 * 1024),
            headers={"Content-Type": "application/x-git-receive-pack-request"},
        )
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "payload_too_large"
        bomb = gzip.compress(b"0" * (40 * 1024 * 1024))
        inflated = await client.post(
            f"{REPO}/git-receive-pack", content=bomb,
            headers={"Content-Type": "application/x-git-receive-pack-request",
                     "Content-Encoding": "gzip"},
        )
        assert inflated.status_code == 413
        bad = await client.post(
            f"{REPO}/git-upload-pack", content=b"not gzip",
            headers={"Content-Type": "application/x-git-upload-pack-request",
                     "Content-Encoding": "gzip"},
        )
        assert bad.status_code == 400


async def test_concurrent_pushes_to_one_branch_one_wins(server, git, team, tmp_path):
    url = server + REPO
    base = tmp_path / "base"
    git.run("clone", url, str(base), key=team.api_key)
    commit_file(git, base, "a.txt", "0\n", "base")
    git.run("push", "origin", "HEAD:main", cwd=base, key=team.api_key)
    clones = []
    for i in range(4):
        clone = tmp_path / f"c{i}"
        git.run("clone", url, str(clone), key=team.api_key)
        commit_file(git, clone, "a.txt", f"writer {i}\n", f"writer {i}")
        clones.append(clone)

    results: list[subprocess.CompletedProcess[str]] = []

    def push(clone: Path) -> None:
        results.append(git.run("push", "origin", "main", cwd=clone, key=team.api_key,
                               check=False))

    threads = [threading.Thread(target=push, args=(clone,)) for clone in clones]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.returncode == 0 for r in results) == [False, False, False, True]
    for loser in (r for r in results if r.returncode != 0):
        assert "rejected" in loser.stderr
    heads = {git.out("rev-parse", "HEAD", cwd=clone) for clone in clones}
    remote = git.run("ls-remote", url, "refs/heads/main", key=team.api_key).stdout.split()[0]
    assert remote in heads


def pkt(line: bytes) -> bytes:
    return f"{len(line) + 4:04x}".encode() + line


def ref_delta_pack(base_sha: str, target: bytes) -> bytes:
    """A one-object pack: a delta against ``base_sha`` (which the pack does not carry)."""
    delta = bytes([1, len(target), len(target)]) + target  # base size, result size, insert
    header = bytes([0x80 | (7 << 4) | (len(delta) & 0x0F), len(delta) >> 4])
    body = (b"PACK" + (2).to_bytes(4, "big") + (1).to_bytes(4, "big") + header
            + bytes.fromhex(base_sha) + zlib.compress(delta))
    return body + hashlib.sha1(body).digest()  # noqa: S324 - git's pack checksum


async def test_broken_pushes_report_unpack_errors_and_change_nothing(server, team):
    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        async def receive(new: str, pack: bytes) -> bytes:
            command = pkt(f"{'0' * 40} {new} refs/heads/main\0report-status\n".encode())
            response = await client.post(
                f"{REPO}/git-receive-pack", content=command + b"0000" + pack,
                headers={"Content-Type": "application/x-git-receive-pack-request"},
            )
            assert response.status_code == 200
            return response.content

        missing_base = await receive("1" * 40, ref_delta_pack("2" * 40, b"x"))
        assert b"unpack " in missing_base and b"unpack ok" not in missing_base
        assert b"ng refs/heads/main unpacker error" in missing_base
        garbage = await receive("1" * 40, b"PACK" + b"\0" * 30)
        assert b"unpack ok" not in garbage and b"ng refs/heads/main" in garbage
        branches = (await client.get("/v1/agent-config/branches")).json()
        assert branches == {"data": []}


async def test_fetch_with_a_long_negotiation_sends_gzip(server, git, team, tmp_path):
    """Many local commits the server lacks: git gzips the bigger negotiation requests."""
    url = server + REPO
    clone = tmp_path / "clone"
    git.run("clone", url, str(clone), key=team.api_key)
    commit_file(git, clone, "a.txt", "base\n", "base")
    git.run("push", "origin", "HEAD:main", cwd=clone, key=team.api_key)
    for i in range(60):
        commit_file(git, clone, "local.txt", f"{i}\n", f"local {i}")
    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        made = (await client.post("/v1/agent-config/commits", json={
            "branch": "main", "message": "remote", "files": {"b.txt": "b"},
        })).json()
    # With no remote-tracking ref the only known-common commit is 61 commits down the local
    # history: git has to send that many "have" lines before the server acknowledges one.
    git.run("update-ref", "-d", "refs/remotes/origin/main", cwd=clone)
    git.env["GIT_TRACE_CURL"] = "1"
    git.env["GIT_TRACE_CURL_NO_DATA"] = "1"
    fetched = git.run("fetch", "origin", cwd=clone, key=team.api_key)
    assert "Content-Encoding: gzip" in fetched.stderr
    assert git.out("rev-parse", "origin/main", cwd=clone) == made["commit_sha"]


async def test_clone_edit_push_publish_and_split_traffic(server, git, team, tmp_path,
                                                          demo_files):
    """The whole authoring loop: git push a config, publish two SHAs, split traffic 50/50."""
    url = server + REPO
    clone = tmp_path / "work"
    git.run("clone", url, str(clone), key=team.api_key)
    for name, text in demo_files.items():
        path = clone / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git.run("add", "-A", cwd=clone)
    git.run("commit", "-q", "-m", "Initial agent", cwd=clone)
    git.run("push", "-u", "origin", "HEAD:main", cwd=clone, key=team.api_key)
    first = git.out("rev-parse", "HEAD", cwd=clone)

    agent = clone / "agent.yaml"
    agent.write_text(agent.read_text().replace("name: Acme Support", "name: Acme Helper"))
    second = commit_file(git, clone, "agent.yaml", agent.read_text(), "Rename the agent")
    git.run("push", "origin", "HEAD:main", cwd=clone, key=team.api_key)

    async with httpx.AsyncClient(base_url=server, headers=team.headers) as client:
        published = []
        for sha, text in ((first, "Initial agent"), (second, "Rename the agent")):
            response = await client.post("/v1/agent-versioning/versions",
                                         json={"staging_commit_sha": sha, "description": text})
            assert response.status_code == 201, response.text
            published.append(response.json())
        assert [(v["label"], v["commit_sha"], v["percent_traffic"]) for v in published] == [
            ("v1", first, 100), ("v2", second, 0)]
        split = [{"agent_version_id": v["id"], "percent_traffic": 50} for v in published]
        response = await client.post("/v1/agent-versioning/versions/traffic",
                                     json={"traffic_allocation": split})
        assert response.status_code == 200 and response.json() == {"traffic_allocation": split}
        listed = (await client.get("/v1/agent-versioning/versions",
                                   params={"has_traffic": "true"})).json()["data"]
        assert [(v["label"], v["percent_traffic"]) for v in listed] == [("v2", 50), ("v1", 50)]
        # Live traffic follows the split: users land on both versions.
        names = set()
        for i in range(40):
            reply = await client.post("/v1/chat/messages",
                                      json={"user_id": f"user-{i}", "text": "hello there"})
            assert reply.status_code == 200
            conversation = (await client.get(
                f"/v1/conversations/{reply.json()['conversation_id']}")).json()
            names.add(conversation["agent_version_id"])
        assert names == {v["id"] for v in published}
