"""Prometheus credentials stay with the server they were given for, and a bad one is refused
at start in one line that never shows it. Real HTTP servers on loopback stand in for a
Prometheus behind a redirecting proxy (no Prometheus needed: the query never gets that far)."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import watch

from memtui.bounded import TOKEN
from memtui.errors import SourceError
from memtui.telemetry import SourceState
from memtui.telemetry.prometheus import (
    BASIC_AUTH_ENV,
    TOKEN_ENV,
    PrometheusSource,
    authorization,
)

SECRET = "S3CRET-token-value"


class _Server:
    """A loopback HTTP server that records each request's headers and answers with `reply`."""

    def __init__(self, reply: tuple[int, dict[str, str]]) -> None:
        self.seen: list[dict[str, str]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                server.seen.append(dict(self.headers))
                code, headers = reply
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def elsewhere() -> Iterator[_Server]:
    server = _Server((200, {"Content-Type": "application/json"}))
    yield server
    server.close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_elsewhere_is_refused_and_the_token_never_follows(
    elsewhere: _Server, code: int
) -> None:
    proxy = _Server((code, {"Location": f"{elsewhere.url}/api/v1/query?x=1"}))
    try:
        source = PrometheusSource(proxy.url, authorization=f"Bearer {SECRET}", deadline_s=5)
        snapshot = source.poll()
    finally:
        proxy.close()
    assert proxy.seen and proxy.seen[0]["Authorization"] == f"Bearer {SECRET}"
    assert elsewhere.seen == []  # not followed: nothing, and no header, reached the other host
    assert snapshot.state is SourceState.ERROR
    reason = snapshot.reason or ""
    assert f"redirected the query (HTTP {code}) to {elsewhere.url}" in reason
    assert SECRET not in reason and SECRET not in (snapshot.remedy or "")
    assert "x=1" not in reason  # the redirect's query is not shown, only its origin


def test_a_token_with_a_line_break_is_refused_without_showing_it(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"{SECRET}\nX-Injected: yes\n")
    with pytest.raises(SourceError) as err:
        authorization(str(token), None, environ={})
    assert str(err.value).startswith(f"--bearer-token-file {token}: not a bearer token")
    assert SECRET not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("content", ["", "   \n", "two words"])
def test_an_empty_or_spaced_token_file_is_refused(tmp_path: Path, content: str) -> None:
    token = tmp_path / "token"
    token.write_text(content)
    with pytest.raises(SourceError, match="not a bearer token"):
        authorization(str(token), None, environ={})


def test_a_token_from_the_environment_is_checked_too() -> None:
    with pytest.raises(SourceError) as err:
        authorization(None, None, environ={TOKEN_ENV: f"{SECRET}\r\nX: y"})
    assert str(err.value).startswith(f"${TOKEN_ENV}: not a bearer token")
    assert SECRET not in str(err.value)
    with pytest.raises(SourceError) as err:
        authorization(None, None, environ={BASIC_AUTH_ENV: f"user:{SECRET}\nX: y"})
    assert str(err.value).startswith(f"${BASIC_AUTH_ENV}: holds a line break")
    assert SECRET not in str(err.value)


def test_good_credentials_make_their_headers() -> None:
    assert authorization(None, None, environ={TOKEN_ENV: f"  {SECRET}\n"}) == f"Bearer {SECRET}"
    basic = authorization(None, None, environ={BASIC_AUTH_ENV: "user:pass word"})
    assert basic == "Basic dXNlcjpwYXNzIHdvcmQ="  # base64 of "user:pass word"
    assert authorization(None, None, environ={}) is None


def test_a_fifo_a_device_or_a_huge_file_is_no_credential(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes: a plain open() would wait forever
    big = tmp_path / "big"
    big.write_bytes(b"a" * (TOKEN.limit + 1))
    for path, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                      (big, "over 64 KiB")):  # fmt: skip
        with pytest.raises(SourceError, match=why):
            authorization(str(path), None, environ={})


def test_the_command_says_one_line_and_exits_2(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"{SECRET}\nX-Injected: yes")
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, BASIC_AUTH_ENV)}
    out = watch("--once", "--prometheus", "http://127.0.0.1:9", "--bearer-token-file",
                str(token), env=env, timeout=60)  # fmt: skip
    assert out.returncode == 2, out
    assert SECRET not in out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bearer-token-file" in lines[0], out.stderr
