"""The embedded database: ``serve`` without a database URL starts, reuses and stops it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HELPLINE = [sys.executable, "-m", "helpline"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELPLINE_")}
    env["HELPLINE_DATA_DIR"] = str(data_dir)
    return env


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early with {proc.returncode}")
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("serve did not become ready")


def _postgres_running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_serve_with_embedded_database_survives_restart(tmp_path):
    data_dir = tmp_path / "data"
    env = _env(data_dir)
    demo = subprocess.run([*HELPLINE, "demo", "--json"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert demo.returncode == 0, demo.stderr
    key = json.loads(demo.stdout.strip().splitlines()[-1])["api_key"]
    pgdata = data_dir / "postgres"
    assert not _postgres_running(pgdata), "demo must stop the server it started"

    for _ in range(2):  # the second start reuses the same data
        port = _free_port()
        proc = subprocess.Popen([*HELPLINE, "serve", "--port", str(port), "--no-worker"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
            response = httpx.get(f"http://127.0.0.1:{port}/v1/team/settings",
                                 headers={"Authorization": f"Bearer {key}"}, timeout=5)
            assert response.status_code == 200
            assert response.json()["slug"] == "acme"
            assert _postgres_running(pgdata)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        assert proc.returncode == 0
        assert not _postgres_running(pgdata), "Ctrl-C must stop the embedded server"
