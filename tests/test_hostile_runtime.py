"""Hostile live inputs, run as the installed command (`python -m memtui`), each bounded in time
and memory: a Prometheus that answers the wrong shape, NaN, 500 MB, forever or malformed HTTP;
host lists of a billion names, or of none; a `squeue` that hangs, fails or prints a billion
hosts; NVML's "not available" sentinel; a process on the GPU whose command line names a FIFO,
a neighbour's alias bomb or /dev/zero; an unreadable config folder; and the real dashboard in
a pseudo-terminal, sent SIGTERM, SIGHUP, SIGINT and SIGSTOP/SIGCONT in several rhythms.

Each command must end with exit 0, 1 or 2, say an error in one line, never print the token it
was given, and never write an escape byte to stdout. The dashboard must give the terminal back
(attributes as before, alternate screen left, mouse tracking off, cursor shown) and answer `q`
after every rhythm, also with a hostile process and config on the node.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_nvml.harness import FakeNvml, gpu

ROOT = Path(__file__).resolve().parents[1]
SECRET = "S3CRET-token-never-shown"
MEMORY_LIMIT = 3 * 2**30  # address space of each command: Python, Textual and pydantic fit
RUN_TIMEOUT = 90  # seconds; the commands end in a few (a generous bound on a loaded machine)
NOT_AVAILABLE = 2**64 - 1


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["MEMTUI_PROMETHEUS_TOKEN"] = SECRET
    env.update(extra or {})
    return env


def memtui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args],
        capture_output=True,
        text=True,
        env=env or _env(),
        cwd=ROOT,
        timeout=RUN_TIMEOUT,
        preexec_fn=_limit_memory,
    )


def check_bounded(result: subprocess.CompletedProcess[str]) -> None:
    """The rules every hostile run keeps."""
    assert result.returncode in (0, 1, 2), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert SECRET not in result.stdout + result.stderr
    assert "\x1b" not in result.stdout
    if result.returncode != 0 and result.stderr.strip():
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# -- a hostile Prometheus --------------------------------------------------------------------

GOOD_LABELS = {"gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA H100", "Hostname": "gpu01"}


def _answer(result: object) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def _series(name: str, value: str, **labels: object) -> dict[str, object]:
    return {"metric": {"__name__": name, **GOOD_LABELS, **labels}, "value": [1.0, value]}


BODIES: dict[str, bytes] = {
    "data-list": json.dumps({"status": "success", "data": []}).encode(),
    "item-number": _answer([1, 2, 3]),
    "item-list": _answer([["metric", "value"]]),
    "label-list": _answer([_series("DCGM_FI_DEV_FB_USED", "1", gpu=["0"])]),
    "label-number": _answer([_series("DCGM_FI_DEV_FB_USED", "1", Hostname=7)]),
    "label-object": _answer([_series("DCGM_FI_DEV_FB_USED", "1", UUID={"a": 1})]),
    "nan": _answer([_series("DCGM_FI_DEV_FB_USED", "NaN"), _series("DCGM_FI_DEV_FB_FREE", "NaN")]),
    "negative": _answer([_series("DCGM_FI_DEV_FB_USED", "-5")]),
    "escapes": _answer(
        [
            _series("DCGM_FI_DEV_FB_USED", "100", Hostname="\x1b]0;pwned\x07\x1b[2J\u202egpu"),
            _series("DCGM_FI_DEV_FB_FREE", "100", Hostname="\x1b]0;pwned\x07\x1b[2J\u202egpu"),
        ]
    ),
    "empty": _answer([]),
}


class _Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        case = self.path.strip("/").split("/")[0]
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            if case == "huge":  # 500 MB announced and sent until the reader stops
                self.send_response(200)
                self.send_header("Content-Length", str(500 * 10**6))
                self.end_headers()
                block = b'{"status": "success", "data": {"result": [' + b" " * 2**20
                self.wfile.write(block)
                while True:
                    self.wfile.write(b" " * 2**20)
            elif case == "endless":  # chunked, never ending
                self.protocol_version = "HTTP/1.1"
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while True:
                    self.wfile.write(b"100000\r\n" + b" " * 0x100000 + b"\r\n")
            elif case == "headers":  # a 200 with more headers than http.client takes
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for i in range(200):
                    self.wfile.write(f"X-Filler-{i}: {SECRET}\r\n".encode())
                self.wfile.write(b"\r\n")
            else:
                body = BODIES[case]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("data-list", "data is a list"),
        ("item-number", "result item 0 is a number"),
        ("item-list", "result item 0 is a list"),
        ("label-list", "label gpu is a list"),
        ("label-number", "label Hostname is a number"),
        ("label-object", "label UUID is an object"),
        ("nan", "DCGM_FI_DEV_FB_USED is nan"),
        ("negative", "DCGM_FI_DEV_FB_USED is -5"),
        ("huge", "over 64 MiB"),
        ("endless", "over 64 MiB"),
        ("headers", "HTTPException"),
        ("escapes", "gpu"),
    ],
)
def test_a_hostile_prometheus_answer_is_one_line(prometheus: str, case: str, said: str) -> None:
    result = memtui("watch", "--prometheus", f"{prometheus}/{case}", "--once", "--timeout", "20")
    check_bounded(result)
    assert said in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("hosts", "said"),
    [
        ("gpu[0-999999999]", "over 10,000 hosts"),
        ("a[0-99999]b[0-99999]", "over 10,000 hosts"),
        ("gpu[5-1]", "reversed range"),
        (",,,", "names no host"),
        ("gpu[²-3]", "bad range"),
        ("gpu[" + "1" * 5000 + "]", "bad range"),
    ],
)
def test_a_host_list_past_its_bound_or_naming_nothing_is_refused(
    prometheus: str, hosts: str, said: str
) -> None:
    result = memtui("watch", "--prometheus", f"{prometheus}/empty", "--hosts", hosts, "--once")
    check_bounded(result)
    assert result.returncode == 2
    assert said in result.stderr


def test_a_url_with_control_characters_is_refused_escaped() -> None:
    result = memtui("watch", "--prometheus", "http://127.0.0.1:1/\x1b[2J\r\n", "--once")
    check_bounded(result)
    assert result.returncode == 2
    assert "visible ASCII" in result.stderr and "\x1b" not in result.stderr


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("sleep 600", "squeue did not answer within"),
        ("echo 'Invalid job id' >&2; exit 1", "squeue exited with status 1: Invalid job id"),
        ("echo 'gpu[0-999999999]|N/A'", "over 10,000 hosts"),
        ("yes gpu01", "squeue printed over"),
    ],
)
def test_a_hostile_squeue_is_named(prometheus: str, tmp_path: Path, script: str, said: str) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text(f"#!/bin/sh\n{script}\n")
    squeue.chmod(0o755)
    env = _env({"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    result = memtui(
        "watch", "--prometheus", f"{prometheus}/empty", "--job", "1234", "--once", env=env
    )
    check_bounded(result)
    assert said in result.stdout + result.stderr


# -- NVML's sentinels ----------------------------------------------------------------------


def test_nvml_not_available_reads_as_n_a(fake_nvml: FakeNvml) -> None:
    fake_nvml.write({"gpus": [gpu(0, used=NOT_AVAILABLE, reserved=0, util=(2**32 - 1, 7))]})
    result = memtui("watch", "--once", "--json", env=_env(base=fake_nvml.env()))
    check_bounded(result)
    device = json.loads(result.stdout)["devices"][0]
    assert device["memory_total"] == gpu(0)["total"]
    assert device["memory_used"] is None and device["memory_free"] is None
    assert device["utilization_gpu"] is None and device["utilization_memory"] == 7


# -- a hostile process on the GPU ------------------------------------------------------------

SLEEPER = "import sys, time\ntime.sleep(float(sys.argv[-1]) if sys.argv[-1].isdigit() else 600)\n"
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.fixture
def hostile_node(tmp_path: Path, fake_nvml: FakeNvml) -> Iterator[FakeNvml]:
    """GPU processes whose command lines name a FIFO, a neighbour's alias bomb and config,
    /dev/zero, a bomb as a key=value override, an impossible --nproc_per_node, and a process
    whose command line is 300 KiB; the fake NVML lists them all on GPU 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("torchrun", "tune"):
        (bin_dir / name).write_text(f"#!{sys.executable}\n{SLEEPER}")
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    theirs = tmp_path / "theirs.json"
    theirs.write_text('{"zero_optimization": {"stage": 3}}')
    for path in (fifo, bomb, theirs):
        os.chown(path, 65534, 65534)  # the neighbour's (the tests run as root on CI)
    own_bomb = tmp_path / "own.yaml"
    own_bomb.write_text(BOMB)
    torchrun, tune = str(bin_dir / "torchrun"), str(bin_dir / "tune")
    argvs = [
        [torchrun, "--nproc_per_node", "1000000000000", "train.py", "--bf16"],
        [tune, "run", "lora_finetune_distributed", "--config", str(fifo)],
        [tune, "run", "lora_finetune_distributed", "--config", str(bomb)],
        [torchrun, "--nproc_per_node", "2", "train.py", "--deepspeed", str(theirs)],
        [torchrun, "--nproc_per_node", "2", "train.py", "--deepspeed", "/dev/zero"],
        [tune, "run", "full_finetune_distributed", "--config", str(own_bomb)],
        [tune, "run", "lora_finetune_single_device", "--config", "llama3/8B_lora", f"x={BOMB}"],
        [torchrun, "train.py", *(["A" * 100_000] * 3)],
    ]
    procs = [
        subprocess.Popen([sys.executable, *argv], cwd=tmp_path, stdin=subprocess.DEVNULL)
        for argv in argvs
    ]
    try:
        fake_nvml.write({"gpus": [gpu(0, used=30 * 2**30, procs=[(p.pid, 2**30) for p in procs])]})
        yield fake_nvml
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_attach_reads_no_hostile_file_and_says_why_in_one_line(hostile_node: FakeNvml) -> None:
    result = memtui("watch", "--attach", "--once", "--json", env=_env(base=hostile_node.env()))
    check_bounded(result)
    notes = "\n".join(json.loads(result.stdout)["notes"])
    assert "--nproc_per_node 1000000000000: not a process count (1 to 1024)" in notes
    assert notes.count("belongs to another user (uid 65534)") == 3  # FIFO, bomb, theirs.json
    assert "under /dev, not a config file" in notes
    assert "aliases expand to more than" in notes
    assert "command line is over 256 KiB" in notes
    assert all(len(line) < 2000 for line in notes.splitlines())


# -- the dashboard in a pseudo-terminal ------------------------------------------------------

ALT_SCREEN_OFF, CURSOR_ON, MOUSE_OFF = b"\x1b[?1049l", b"\x1b[?25h", b"\x1b[?1000l"
ALT_SCREEN_ON = b"\x1b[?1049h"


class Terminal:
    """`memtui ARGS` on a pseudo-terminal of 120x40, its output collected."""

    def __init__(self, *args: str, env: dict[str, str], preexec: object = None) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.before = termios.tcgetattr(self.slave)
        self.output = bytearray()

        def setup() -> None:
            _limit_memory()
            if callable(preexec):
                preexec()

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memtui", *args],
            stdin=self.slave, stdout=self.slave, stderr=self.slave, cwd=ROOT,
            env={**env, "TERM": "xterm-256color"}, start_new_session=True, preexec_fn=setup,
        )  # fmt: skip

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    self.output.extend(os.read(self.master, 65536))
                except OSError:
                    return

    def wait_for(self, text: bytes, timeout: float = RUN_TIMEOUT, after: int = 0) -> None:
        end = time.monotonic() + timeout
        while text not in self.output[after:] and time.monotonic() < end:
            self.pump(0.2)
        assert text in self.output[after:], bytes(self.output[-3000:])

    def started(self) -> None:
        self.wait_for(ALT_SCREEN_ON)
        self.wait_for(b"GPU")  # a frame drawn

    def ended(self, timeout: float = 60) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self.pump(0.2)
        self.pump(0.3)
        code = self.proc.poll()
        assert code is not None, "the dashboard did not end"
        return code

    def settled(self, quiet: float = 1.5, timeout: float = RUN_TIMEOUT) -> None:
        """Wait until application mode has not been restarted for `quiet` seconds (a key
        typed during a restart is flushed, as Textual's `disable_input` does)."""
        end = time.monotonic() + timeout
        count, since = self.output.count(ALT_SCREEN_ON), time.monotonic()
        while time.monotonic() < end and time.monotonic() - since < quiet:
            self.pump(0.1)
            if self.output.count(ALT_SCREEN_ON) != count:
                count, since = self.output.count(ALT_SCREEN_ON), time.monotonic()
        assert time.monotonic() - since >= quiet, "application mode kept restarting"

    def restored(self) -> None:
        tail = bytes(self.output)
        assert termios.tcgetattr(self.slave) == self.before
        assert ALT_SCREEN_OFF in tail and CURSOR_ON in tail and MOUSE_OFF in tail
        assert b"Traceback" not in tail

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for term in opened:
        term.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_terminating_signal_gives_the_terminal_back(
    terminal: list[Terminal], signum: signal.Signals
) -> None:
    term = Terminal("--demo", env=_env())
    terminal.append(term)
    term.started()
    term.proc.send_signal(signum)
    assert term.ended() == 128 + signum
    term.restored()


@pytest.mark.parametrize(("pairs", "pause"), [(3, 0.0), (10, 0.0), (3, 0.05), (4, 0.3)], ids=str)
def test_sigstop_sigcont_in_any_rhythm_leaves_q_answered(
    terminal: list[Terminal], pairs: int, pause: float
) -> None:
    term = Terminal("--demo", env=_env())
    terminal.append(term)
    term.started()
    for _ in range(pairs):
        term.proc.send_signal(signal.SIGSTOP)
        time.sleep(pause)
        term.proc.send_signal(signal.SIGCONT)
        time.sleep(pause)
    term.settled()
    os.write(term.master, b"q")
    assert term.ended() == 0
    term.restored()


def test_sigtstp_then_sigcont_resumes(terminal: list[Terminal]) -> None:
    term = Terminal("--demo", env=_env())
    terminal.append(term)
    term.started()
    term.proc.send_signal(signal.SIGTSTP)
    term.wait_for(ALT_SCREEN_OFF)  # the terminal handed back while stopped
    term.proc.send_signal(signal.SIGCONT)
    term.wait_for(ALT_SCREEN_ON, after=len(term.output))  # resumed
    term.settled()
    os.write(term.master, b"q")
    assert term.ended() == 0
    term.restored()


def test_an_unreadable_config_folder_is_a_note(terminal: list[Terminal], tmp_path: Path) -> None:
    # sudo -E: a config folder memtui may not read. Root reads any folder (the tests run as
    # root on CI), and the interpreter lives where another user cannot start it, so as root a
    # folder whose check fails for root as well stands in: a name past NAME_MAX (the same
    # OSError from Path.is_dir, ENAMETOOLONG for EACCES)
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o000)
    folder = str(tmp_path / ("x" * 300)) if os.getuid() == 0 else str(xdg)
    try:
        term = Terminal("--demo", env=_env({"XDG_CONFIG_HOME": folder}))
        terminal.append(term)
        term.started()
        term.wait_for(b"skipped")  # the note, on screen
        os.write(term.master, b"q")
        assert term.ended() == 0
        term.restored()
    finally:
        xdg.chmod(0o755)


def test_the_dashboard_answers_keys_with_a_hostile_node(
    terminal: list[Terminal], hostile_node: FakeNvml
) -> None:
    term = Terminal(env=_env(base=hostile_node.env()))
    terminal.append(term)
    term.started()
    for key in (b"j", b"j", b"?", b"?"):  # attach (its files refused), the key list twice
        os.write(term.master, key)
        term.pump(0.5)
    term.wait_for(b"Keys")  # the key list opened: keys are answered
    os.write(term.master, b"q")
    assert term.ended() == 0
    term.restored()
