"""The Prometheus source: every GPU of a job on many hosts, as clusters already export it.

Clusters run NVIDIA's dcgm-exporter or nvitop-exporter on every node, scraped by Prometheus;
memtui reads that server through its HTTP API (`/api/v1/query`) rather than growing an agent
of its own, and answers the same snapshots as the NVML source, one node per host.

Metrics read (names and labels as the exporters publish them):
- dcgm-exporter (NVIDIA/dcgm-exporter etc/default-counters.csv and the README's sample
  output): `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE`, `DCGM_FI_DEV_FB_RESERVED` in MiB;
  and the monitor's gauges of the default counters (etc/default-counters.csv at commit
  00d6d344ea4a39112b211b9ff5af3d97e0bb51c2): `DCGM_FI_DEV_GPU_UTIL` and
  `DCGM_FI_DEV_MEM_COPY_UTIL` (%), `DCGM_FI_DEV_GPU_TEMP` (C), `DCGM_FI_DEV_POWER_USAGE` (W),
  `DCGM_FI_DEV_SM_CLOCK` and `DCGM_FI_DEV_MEM_CLOCK` (MHz); the power limit is not among the
  default counters, so it is n/a;
  labels `gpu`, `UUID`, `modelName`, `Hostname` (older releases spell it `hostname`), MIG
  `GPU_I_PROFILE`/`GPU_I_ID`, Kubernetes `pod`/`namespace`/`container` (`exported_*` once a
  scrape relabels them), Slurm `hpc_job`.
- nvitop-exporter (XuehaiPan/nvitop nvitop-exporter/nvitop_exporter/exporter.py: gauges with
  unit MiB, so prometheus_client suffixes `_MiB`): `gpu_memory_used_MiB`,
  `gpu_memory_total_MiB`, `process_gpu_memory_MiB`; labels `hostname` (the host's IP address
  unless the exporter is given `--hostname`), `index` ("0", "0:1" for MIG), `devicename`,
  `uuid`, and per process `pid`, `username`.

One poll is one instant query, whatever the number of GPUs: the memory series, each GPU's
last sample time (`timestamp`, for stale samples) and its peak since the job began
(`max_over_time`), the latter two told apart by a `memtui` label (`or` would otherwise drop
series whose labels match once the metric name is gone). Values arrive as strings.

The job's GPUs: `--job ID` selects the `hpc_job` label, and when no series carries it, the
job's nodes from Slurm (`squeue`); `--hosts gpu[01-04]` selects hosts (by `Hostname` or
`hostname`, short names matching FQDNs too); `--selector` adds raw label matchers.

Failures are data: an unreachable server, an HTTP error, a query error, stale samples and a
host that stops reporting each become one line (the cluster's or the node's reason) and
LOST hosts, never an exception. Credentials (bearer token or basic auth) come from a file or
the environment, never the command line; https verifies with the system's CAs.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import re
import select
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.message import Message
from typing import IO, Any

from memtui.errors import SourceError
from memtui.telemetry.models import (
    ClusterSnapshot,
    DeviceSnapshot,
    NodeSnapshot,
    ProcessSnapshot,
    SourceState,
)
from memtui.telemetry.source import SourceInfo, SourceKind
from memtui.text import shown

MiB = 1024**2

#: dcgm-exporter's gauges beside memory: the `DeviceSnapshot` field each fills and the factor
#: from the exporter's unit to the field's (etc/default-counters.csv: %, C, W, MHz).
_DCGM_READINGS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_gpu", 1),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilization_memory", 1),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1),
    "DCGM_FI_DEV_POWER_USAGE": ("power_mw", 1000),  # W -> mW, NVML's unit
    "DCGM_FI_DEV_SM_CLOCK": ("clock_sm_mhz", 1),
    "DCGM_FI_DEV_MEM_CLOCK": ("clock_memory_mhz", 1),
}
_DCGM = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED",
         *_DCGM_READINGS)  # fmt: skip
_NVITOP = ("gpu_memory_used_MiB", "gpu_memory_total_MiB", "process_gpu_memory_MiB")
#: The series whose sample time and peak are read: used memory, from either exporter.
_USED = ("DCGM_FI_DEV_FB_USED", "gpu_memory_used_MiB")
#: Label spellings of the host, in the order they are trusted.
_HOST_LABELS = ("Hostname", "hostname")
#: Environment variables holding credentials (never a command-line flag).
TOKEN_ENV = "MEMTUI_PROMETHEUS_TOKEN"
BASIC_AUTH_ENV = "MEMTUI_PROMETHEUS_BASIC_AUTH"
#: Samples older than this many of the scrape intervals seen are stale.
STALE_INTERVALS = 3
#: Stale after this many seconds until a scrape interval has been seen.
STALE_DEFAULT_S = 30.0
#: Seconds `squeue` may take (less when the poll's deadline is nearer).
SLURM_TIMEOUT_S = 5.0
MAX_SLURM_BYTES = 2**20
"""The most of `squeue`'s output read: 1 MiB (its answer for one job is one line)."""
MAX_HOSTS = 10_000
"""The most hosts a host list may name: beyond the largest Slurm jobs (some 9,400 nodes on
Frontier); `gpu[0-999999999]` is refused before a name is made."""
_MAX_BRACKETS = 8
_MAX_ERROR_BYTES = 64 * 2**10  # an error answer's body: Prometheus's is one JSON line
MAX_ANSWER_BYTES = 64 * 2**20
"""The most of a Prometheus answer read: 64 MiB, some 100,000 series (a few hundred bytes of
JSON each: a thousand hosts of eight GPUs with their processes); a bigger or endless answer is
one line."""

_JOB_ID = re.compile(r"[0-9A-Za-z_.+-]+")


class _Failure(Exception):
    """A poll that failed as a whole: turned into the cluster's state by `poll`."""

    def __init__(self, state: SourceState, reason: str, remedy: str) -> None:
        super().__init__(reason)
        self.state, self.reason, self.remedy = state, reason, remedy


def expand_hostlist(text: str) -> list[str]:
    """A Slurm host list as names, like `scontrol show hostnames`: "gpu[01-03,07],login1"
    -> gpu01 gpu02 gpu03 gpu07 login1 (zero padding kept, several ranges per name). A list
    of more than MAX_HOSTS names (counted before any is made), a reversed range, or one that
    names no host at all (",,,") is a SourceError."""
    items = _split_top(text)
    if any(item.count("[") > _MAX_BRACKETS for item in items):
        raise SourceError(f"host list {shown(text, 60)}: over {_MAX_BRACKETS} ranges in a name")
    count = sum(_count_item(item) for item in items)
    if count > MAX_HOSTS:
        raise SourceError(
            f"host list {shown(text, 60)}: names over {MAX_HOSTS:,} hosts, more than any job"
        )
    hosts: list[str] = []
    for item in items:
        hosts.extend(_expand_item(item))
    if not hosts:
        raise SourceError(f"host list {shown(text, 60)!r}: names no host")
    return hosts


def _split_top(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SourceError(f"unbalanced ']' in host list {shown(text, 60)}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise SourceError(f"unbalanced '[' in host list {shown(text, 60)}")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _ranges(item: str) -> tuple[str, list[tuple[int, int, int]], str] | None:
    """An item's text before its first bracket, that bracket's ranges (low, high, width) and
    the text after it; None for a plain name."""
    open_at = item.find("[")
    if open_at < 0:
        return None
    close_at = item.index("]", open_at)
    head, body, tail = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    ranges = []
    for part in body.split(","):
        low, _, high = part.strip().partition("-")
        # ASCII digits, few enough for int() (isdigit() alone takes "²"; int() refuses
        # 4,300 digits)
        if not _digits(low) or (high and not _digits(high)):
            raise SourceError(f"bad range {shown(part, 40)!r} in host list {shown(item, 60)}")
        if int(high or low) < int(low):
            raise SourceError(f"reversed range {shown(part, 40)!r} in host list {shown(item, 60)}")
        ranges.append((int(low), int(high or low), len(low)))
    return head, ranges, tail


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 18


def _count_item(item: str) -> int:
    """How many names `item` expands to, without making them."""
    parsed = _ranges(item)
    if parsed is None:
        return 1
    _head, ranges, tail = parsed
    return sum(high - low + 1 for low, high, _ in ranges) * _count_item(tail)


def _expand_item(item: str) -> list[str]:
    parsed = _ranges(item)
    if parsed is None:
        return [item]
    head, ranges, tail = parsed
    out: list[str] = []
    for low, high, width in ranges:
        for n in range(low, high + 1):
            out.extend(head + str(n).zfill(width) + rest for rest in _expand_item(tail))
    return out


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _regex_literal(value: str) -> str:
    """`value` matched literally inside an RE2 regular expression."""
    return re.sub(r"([.^$*+?()\[\]{}|\\-])", r"\\\1", value)


@dataclass
class _Gpu:
    """One GPU's series gathered from a query (mutable while a poll assembles it)."""

    host: str
    index: int
    mig_index: int | None = None
    uuid: str | None = None
    parent_uuid: str | None = None
    name: str | None = None
    used: float | None = None
    free: float | None = None
    reserved: float | None = None
    total: float | None = None
    peak: float | None = None
    sample_time: float | None = None
    workload: str | None = None
    processes: list[ProcessSnapshot] = field(default_factory=list)
    readings: dict[str, int] = field(default_factory=dict)
    """`DeviceSnapshot` fields from `_DCGM_READINGS` (utilisation, temperature, ...)."""
    nvitop: bool = False
    unreadable: list[str] = field(default_factory=list)
    """Series whose value is no reading ("DCGM_FI_DEV_FB_USED is nan")."""


class PrometheusSource:
    """A cluster's GPUs from its Prometheus (dcgm-exporter or nvitop-exporter series).

    `deadline_s` bounds one poll's HTTP time (the registry keeps it under `BoundedSource`'s
    timeout, so a slow server answers as this source's own failure, with the hosts marked
    lost, rather than as a timeout). `clock` gives Unix time; `slurm` runs `squeue` (tests
    pass a stand-in)."""

    def __init__(
        self,
        url: str,
        *,
        job: str | None = None,
        hosts: Sequence[str] = (),
        selector: str | None = None,
        authorization: str | None = None,
        deadline_s: float = 4.0,
        stale_after_s: float | None = None,
        clock: Callable[[], float] = time.time,
        slurm: Callable[[str, float], tuple[list[str], float | None]] | None = None,
    ) -> None:
        if not (url.isascii() and url.isprintable()) or " " in url:
            # http.client refuses control characters only when sending (InvalidURL, quoting
            # the URL); everything memtui prints names the URL
            raise SourceError(
                f"--prometheus {shown(url, 80)}: a URL is visible ASCII (no spaces or control "
                "characters; %-encode the others)"
            )
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError(f"--prometheus {url}: give an http:// or https:// URL")
        if parts.username or parts.password:
            raise SourceError(
                "--prometheus: credentials do not belong on the command line; use "
                f"--basic-auth-file or ${BASIC_AUTH_ENV}"
            )
        if job is not None and not _JOB_ID.fullmatch(job):
            raise SourceError(f"--job {job!r}: not a Slurm job id")
        self.url = url.rstrip("/")
        self.info = SourceInfo(
            SourceKind.CLUSTER,
            f"prometheus:{self.url}",
            f"Prometheus {self.url}",
            f"Prometheus at {self.url} is not answering",
            "check that it runs and that this machine can reach it",
            cluster=True,
        )
        self.name = self.info.label
        self.job = job
        self.hosts = tuple(hosts)
        self.selector = (selector or "").strip().strip("{}").strip()
        self.deadline_s = deadline_s
        self.stale_after_s = stale_after_s
        self._authorization = authorization
        self._clock = clock
        self._slurm = slurm or slurm_job
        self._context = ssl.create_default_context() if parts.scheme == "https" else None
        self._started = clock()
        self._job_by_label = job is not None  # until no series carries the job's label
        self._since: float | None = None  # when the job began, once Slurm said
        self._known: dict[str, NodeSnapshot] = {}  # last answer of every host seen
        self._interval: float | None = None  # the scrape interval seen
        self._last_sample: dict[tuple[str, int, int | None], float] = {}

    @classmethod
    def from_options(cls, options: Any, deadline_s: float) -> PrometheusSource:
        """The source for `memtui ... --prometheus URL` flags (see the registry)."""
        hosts = getattr(options, "hosts", None)
        return cls(
            options.prometheus,
            job=getattr(options, "job", None),
            hosts=expand_hostlist(hosts) if hosts else (),
            selector=getattr(options, "selector", None),
            authorization=authorization(
                getattr(options, "bearer_token_file", None),
                getattr(options, "basic_auth_file", None),
            ),
            deadline_s=deadline_s,
            stale_after_s=getattr(options, "stale_after", None),
        )

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""

    # -- polling ---------------------------------------------------------------------

    def poll(self) -> ClusterSnapshot:
        """Every selected GPU now, host by host; failures come back as states."""
        started = time.perf_counter()
        now = self._clock()
        deadline = time.monotonic() + self.deadline_s
        try:
            gpus = self._query_gpus(now, deadline)
            if self._job_by_label and not gpus and self.job is not None:
                # no series carries hpc_job: the exporters lack the job mapping; ask Slurm
                self._resolve_job(deadline)
                gpus = self._query_gpus(now, deadline)
        except _Failure as failure:
            return self._failed(failure, now, time.perf_counter() - started)
        nodes = self._nodes(gpus, now)
        state, reason, remedy = SourceState.OK, None, None
        if not nodes:
            state = SourceState.ERROR
            reason = f"no GPU series match {self._describe()}"
            remedy = "check the selection and that Prometheus scrapes dcgm- or nvitop-exporter"
        return ClusterSnapshot(
            time=now,
            source=self.name,
            state=state,
            reason=reason,
            remedy=remedy,
            nodes=nodes,
            poll_seconds=time.perf_counter() - started,
        )

    def query_text(self, now: float) -> str:
        """The one PromQL query a poll sends."""
        since = self._since if self._since is not None else self._started
        window = f"{max(1, math.ceil(now - since))}s"
        names = "|".join((*_DCGM, *_NVITOP))
        used = "|".join(_USED)
        parts: list[str] = []
        for matchers in self._matchers():
            values = f"{{__name__=~{_quote(names)}{matchers}}}"
            used_sel = f"{{__name__=~{_quote(used)}{matchers}}}"
            parts.append(values)
            parts.append(f'label_replace(timestamp({used_sel}), "memtui", "sample_time", "", "")')
            parts.append(
                f'label_replace(max_over_time({used_sel}[{window}]), "memtui", "peak", "", "")'
            )
        return " or ".join(parts)

    def _matchers(self) -> list[str]:
        """Label matchers (", a=..." each) of every alternative selection: one, or one per
        spelling of the host label when hosts are selected."""
        common = ""
        if self._job_by_label and self.job is not None:
            common += f", hpc_job={_quote(self.job)}"
        if self.selector:
            common += f", {self.selector}"
        if not self.hosts:
            return [common]
        names = "|".join(_regex_literal(h) for h in self.hosts)
        pattern = _quote(f"({names})(\\..*)?")  # short names match FQDNs too
        return [f"{common}, {label}=~{pattern}" for label in _HOST_LABELS]

    def _describe(self) -> str:
        if self.job is not None and self._job_by_label:
            what = f'hpc_job="{self.job}"'
        elif self.hosts:
            what = f"hosts {','.join(self.hosts[:4])}{'...' if len(self.hosts) > 4 else ''}"
        else:
            what = "any host"
        return f"{what}{' and ' + self.selector if self.selector else ''}"

    def _resolve_job(self, deadline: float) -> None:
        assert self.job is not None
        # within the poll's own deadline, so a hanging squeue is named as such (not as a
        # Prometheus that does not answer)
        left = min(SLURM_TIMEOUT_S, deadline - time.monotonic())
        try:
            hosts, since = self._slurm(self.job, max(left, 0.1))
        except (OSError, subprocess.SubprocessError, ValueError, SourceError) as err:
            raise _Failure(
                SourceState.ERROR,
                f'no series carry hpc_job="{self.job}" and Slurm could not list the job\'s '
                f"nodes ({shown(_one_line(err))})",
                "give them with --hosts, or map jobs in dcgm-exporter (--hpc-job-mapping-dir)",
            ) from None
        if not hosts:
            raise _Failure(
                SourceState.ERROR,
                f"Slurm lists no nodes for job {self.job} (not running?)",
                "check `squeue -j JOB`",
            )
        self.hosts, self._since, self._job_by_label = tuple(hosts), since, False

    def _query_gpus(self, now: float, deadline: float) -> dict[tuple[str, int, int | None], _Gpu]:
        result = self._request(self.query_text(now), now, deadline)
        gpus: dict[tuple[str, int, int | None], _Gpu] = {}
        for series in result:
            metric = series.get("metric") or {}
            value = _number(series.get("value"))
            gpu = _gpu_of(metric, gpus)
            if gpu is None or value is None:
                continue
            kind = metric.get("memtui")
            if not math.isfinite(value) or (kind != "sample_time" and _bytes(value) is None):
                # NaN (a gauge the exporter could not read), infinite, negative or past 2^64
                # bytes: the GPU is shown with the series named, never dropped
                gpu.unreadable.append(f"{shown(kind or metric.get('__name__') or '?', 40)} "
                                      f"is {value:g}")  # fmt: skip
                continue
            if kind == "sample_time":
                gpu.sample_time = value
            elif kind == "peak":
                gpu.peak = value
            else:
                _take_value(gpu, metric, value)
        return gpus

    def _request(self, query: str, now: float, deadline: float) -> list[dict[str, Any]]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Failure(SourceState.TIMEOUT, f"{self.info.silent} (no time left)",
                           self.info.silent_remedy)  # fmt: skip
        body = urllib.parse.urlencode({"query": query, "time": f"{now:.3f}"}).encode()
        request = urllib.request.Request(
            f"{self.url}/api/v1/query",
            data=body,
            headers={"Accept": "application/json", "User-Agent": "memtui"},
            method="POST",
        )
        if self._authorization is not None:
            request.add_header("Authorization", self._authorization)
        opener = urllib.request.build_opener(
            _NoRedirect(), urllib.request.HTTPSHandler(context=self._context)
        )
        try:
            with opener.open(request, timeout=left) as answer:
                payload = self._read_answer(answer, deadline)
        except _Redirected as err:
            raise _Failure(
                SourceState.ERROR,
                f"Prometheus at {self.url} redirected the query (HTTP {err.code}) to "
                f"{err.origin}: memtui follows no redirect, so credentials never leave the "
                "server they were given for",
                "give --prometheus the URL that answers the query itself",
            ) from None
        except urllib.error.HTTPError as err:
            raise self._http_failure(err) from None
        except (http.client.HTTPException, ValueError) as err:
            # not OSError: a malformed status line or headers (too many, a line too long), a
            # URL http.client refuses; only the kind is said, since the text of some quotes
            # what was sent or received
            raise _Failure(
                SourceState.ERROR,
                f"Prometheus at {self.url} gave no HTTP answer memtui can read "
                f"({type(err).__name__})",
                self.info.silent_remedy,
            ) from None
        except (TimeoutError, urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, TimeoutError) or isinstance(err, TimeoutError):
                raise _Failure(
                    SourceState.TIMEOUT,
                    f"{self.info.silent} (no answer within {self.deadline_s:g} s)",
                    self.info.silent_remedy,
                ) from None
            raise _Failure(
                SourceState.ERROR,
                f"cannot reach Prometheus at {self.url}: {_one_line(reason)}",
                self.info.silent_remedy,
            ) from None
        data = _json(payload)
        if data is None or data.get("status") != "success":
            error = (data or {}).get("error") or "not a Prometheus API answer"
            raise _Failure(
                SourceState.ERROR,
                f"Prometheus at {self.url} refused the query: {shown(_one_line(error))}",
                "check --selector, and that the URL is Prometheus's (it serves /api/v1/query)",
            )
        return self._series(data.get("data"))

    def _read_answer(self, answer: Any, deadline: float) -> bytes:
        """The answer's body, at most MAX_ANSWER_BYTES and within the poll's deadline: the
        socket timeout bounds each read, not a server that trickles bytes or never ends."""
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = answer.read1(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise _Failure(
                    SourceState.ERROR,
                    f"Prometheus at {self.url} answered over {MAX_ANSWER_BYTES // 2**20} MiB: "
                    "not read",
                    "select fewer series (--job, --hosts, --selector)",
                )
            if time.monotonic() > deadline:
                raise _Failure(
                    SourceState.TIMEOUT,
                    f"{self.info.silent} (its answer did not end within {self.deadline_s:g} s)",
                    self.info.silent_remedy,
                )
            chunks.append(chunk)

    def _series(self, data: Any) -> list[dict[str, Any]]:
        """The query's series, each {"metric": {label: text}, "value": [...]}, as the HTTP API
        answers an instant query (prometheus/web/api/v1/api.go, queryData); an answer of
        another shape (`data` not an object, an item not a series, a label that is not text)
        is one line, never read in part."""
        if not isinstance(data, dict):
            raise self._shape(f"data is {_kind(data)}")
        result = data.get("result", [])
        if not isinstance(result, list):
            raise self._shape(f"result is {_kind(result)}")
        for number, series in enumerate(result):
            metric = series.get("metric", {}) if isinstance(series, dict) else None
            if not isinstance(metric, dict):
                raise self._shape(f"result item {number} is {_kind(series)}, not a series")
            bad = next((k for k, v in metric.items() if not isinstance(v, str)), None)
            if bad is not None:
                what = f"series {number}: label {shown(bad, 40)} is {_kind(metric[bad])}"
                raise self._shape(what)
        return result

    def _shape(self, where: str) -> _Failure:
        return _Failure(
            SourceState.ERROR,
            f"Prometheus at {self.url} answered in a shape memtui cannot read ({where})",
            "check that the URL is Prometheus's (it serves /api/v1/query)",
        )

    def _http_failure(self, err: urllib.error.HTTPError) -> _Failure:
        detail = ""
        with_body = _json(err.read(_MAX_ERROR_BYTES) if err.fp is not None else b"")
        if with_body is not None and with_body.get("error"):
            detail = f": {shown(_one_line(with_body['error']))}"
        if err.code in (401, 403):
            return _Failure(
                SourceState.NO_PERMISSION,
                f"Prometheus at {self.url} answered HTTP {err.code} (not authorised){detail}",
                f"give a token with --bearer-token-file or ${TOKEN_ENV} (or basic auth)",
            )
        if err.code == 400 or err.code == 422:
            return _Failure(
                SourceState.ERROR,
                f"Prometheus at {self.url} refused the query (HTTP {err.code}){detail}",
                'check --selector (PromQL label matchers such as namespace="ml")',
            )
        return _Failure(
            SourceState.ERROR,
            f"Prometheus at {self.url} answered HTTP {err.code}{detail}",
            "check the URL (the server's root, e.g. http://prometheus:9090)",
        )

    # -- assembling nodes -----------------------------------------------------------------

    def _nodes(
        self, gpus: Mapping[tuple[str, int, int | None], _Gpu], now: float
    ) -> tuple[NodeSnapshot, ...]:
        self._learn_interval(gpus)
        stale_s = self._stale_s()
        by_host: dict[str, list[_Gpu]] = {}
        for gpu in gpus.values():
            by_host.setdefault(gpu.host, []).append(gpu)
        for host in self.hosts:  # selected hosts that never answered are said too
            by_host.setdefault(_matching(host, by_host) or host, [])
        for host in self._known:  # and hosts seen before, whose series are gone
            by_host.setdefault(host, [])
        nodes = []
        for host in sorted(by_host):
            found = sorted(by_host[host], key=lambda g: (g.index, g.mig_index or -1))
            current = [g for g in found if g.used is not None or g.unreadable]
            if not current and (found or host in self._known):
                # only its peak, or nothing since it answered: it reported, and stopped
                node = self._lost(host, "stopped reporting", now)
            elif not current:
                node = self._lost(host, "no samples from this host", now)
            else:
                newest = max((g.sample_time or now) for g in current)
                if now - newest > stale_s:
                    node = self._lost(host, f"samples are {now - newest:.0f} s old (stale)", now)
                else:
                    node = self._node(host, current, now)
            self._known[host] = node if node.ok else self._known.get(host, node)
            nodes.append(node)
        return tuple(nodes)

    def _node(self, host: str, gpus: Iterable[_Gpu], now: float) -> NodeSnapshot:
        devices = tuple(_device(g) for g in gpus)
        return NodeSnapshot(time=now, hostname=host, source=self.name, devices=devices)

    def _lost(self, host: str, why: str, now: float) -> NodeSnapshot:
        """A host that does not answer: its last GPUs, marked lost, and why."""
        last = self._known.get(host)
        devices = tuple(
            d.model_copy(
                update={
                    "lost": True,
                    "error": f"host {why}",
                    "memory_used": None,
                    "memory_free": None,
                    "processes": None,
                }
            )
            for d in (last.devices if last is not None else ())
        )
        return NodeSnapshot(
            time=now,
            hostname=host,
            source=self.name,
            state=SourceState.LOST,
            reason=f"host {host} {why}",
            remedy="check its exporter (and that Prometheus still scrapes it)",
            devices=devices,
        )

    def _failed(self, failure: _Failure, now: float, took: float) -> ClusterSnapshot:
        """The whole poll failed: every host known so far is lost, for the same reason."""
        nodes = tuple(
            self._lost(host, f"not known: {failure.reason}", now) for host in sorted(self._known)
        )
        return ClusterSnapshot(
            time=now,
            source=self.name,
            state=failure.state,
            reason=failure.reason,
            remedy=failure.remedy,
            nodes=nodes,
            poll_seconds=took,
        )

    def _learn_interval(self, gpus: Mapping[tuple[str, int, int | None], _Gpu]) -> None:
        """The scrape interval: the smallest step seen between a series' sample times."""
        for key, gpu in gpus.items():
            if gpu.sample_time is None:
                continue
            before = self._last_sample.get(key)
            if before is not None and gpu.sample_time > before:
                step = gpu.sample_time - before
                self._interval = step if self._interval is None else min(self._interval, step)
            self._last_sample[key] = gpu.sample_time

    def _stale_s(self) -> float:
        if self.stale_after_s is not None:
            return self.stale_after_s
        if self._interval is None:
            return STALE_DEFAULT_S
        return max(STALE_INTERVALS * self._interval, 2.0)


def _matching(host: str, seen: Mapping[str, object]) -> str | None:
    """The name a selected host reports under (its FQDN, say), if it reports."""
    for name in seen:
        if name == host or name.startswith(host + "."):
            return name
    return None


def _gpu_of(
    metric: Mapping[str, str], gpus: dict[tuple[str, int, int | None], _Gpu]
) -> _Gpu | None:
    """The GPU a series belongs to (created on first sight); None for a foreign series."""
    host = next((metric[k] for k in _HOST_LABELS if metric.get(k)), None)
    if host is None:  # no host label: the scrape target's address stands in
        host = _instance_host(metric.get("instance", ""))
    if "gpu" in metric and ("UUID" in metric or "modelName" in metric):  # dcgm-exporter
        index_text, mig_text = metric["gpu"], metric.get("GPU_I_ID")
        nvitop = False
    elif "index" in metric:  # nvitop-exporter: "0", or "0:1" for MIG device 1 of GPU 0
        index_text, _, mig_text = metric["index"].partition(":")
        nvitop = True
    else:
        return None
    try:
        index = int(index_text)
        mig = int(mig_text) if mig_text else None
    except ValueError:
        return None
    key = (host, index, mig)
    gpu = gpus.get(key)
    if gpu is None:
        gpu = gpus[key] = _Gpu(host, index, mig, nvitop=nvitop)
    if nvitop:
        gpu.uuid = gpu.uuid or metric.get("uuid")
        gpu.name = gpu.name or metric.get("devicename")
    else:
        uuid = metric.get("UUID")
        if mig is None:
            gpu.uuid = uuid
        else:  # dcgm labels a MIG instance with its parent's UUID
            gpu.parent_uuid = uuid
        name = metric.get("modelName")
        profile = metric.get("GPU_I_PROFILE")
        gpu.name = f"{name} MIG {profile}" if name and profile else name
    gpu.workload = gpu.workload or _workload(metric)
    return gpu


def _instance_host(instance: str) -> str:
    if instance.startswith("["):  # [::1]:9400
        return instance[1:].split("]", 1)[0]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def _workload(metric: Mapping[str, str]) -> str | None:
    """Kubernetes namespace/pod/container (the workload's, `exported_*` after relabelling,
    over the exporter's own), else the Slurm job."""
    parts = [
        metric.get(f"exported_{name}") or metric.get(name) or ""
        for name in ("namespace", "pod", "container")
    ]
    if any(parts):
        return "/".join(p for p in parts if p)
    job = metric.get("hpc_job")
    return f"Slurm job {job}" if job else None


def _take_value(gpu: _Gpu, metric: Mapping[str, str], value: float) -> None:
    name = metric.get("__name__")
    if name == "DCGM_FI_DEV_FB_USED" or name == "gpu_memory_used_MiB":
        gpu.used = value
    elif name == "DCGM_FI_DEV_FB_FREE":
        gpu.free = value
    elif name == "DCGM_FI_DEV_FB_RESERVED":
        gpu.reserved = value
    elif name == "gpu_memory_total_MiB":
        gpu.total = value
    elif name in _DCGM_READINGS:
        target, factor = _DCGM_READINGS[name]
        gpu.readings[target] = round(value * factor)
    elif name == "process_gpu_memory_MiB":
        try:
            pid = int(metric.get("pid", ""))
        except ValueError:
            return
        gpu.processes.append(
            ProcessSnapshot(pid=pid, used_bytes=_bytes(value), user=metric.get("username"))
        )


def _device(gpu: _Gpu) -> DeviceSnapshot:
    used, free, reserved = _bytes(gpu.used), _bytes(gpu.free), _bytes(gpu.reserved)
    if gpu.nvitop:
        total = _bytes(gpu.total)
        free = None if total is None or used is None else max(0, total - used)
    else:
        # DCGM's framebuffer splits into used, free and reserved (as NVML's memory v2 does)
        total = None if used is None or free is None else used + free + (reserved or 0)
        total = total if total is None or total < 2**64 else None
    return DeviceSnapshot(
        index=gpu.index,
        mig_index=gpu.mig_index,
        parent_uuid=gpu.parent_uuid,
        uuid=gpu.uuid,
        name=gpu.name,
        memory_total=total,
        memory_used=used,
        memory_free=free,
        memory_reserved=reserved,
        memory_peak=_bytes(gpu.peak),
        **gpu.readings,  # type: ignore[arg-type]
        workload=gpu.workload,
        # dcgm-exporter lists no processes: the workload labels say who uses the GPU
        processes=tuple(sorted(gpu.processes, key=lambda p: p.pid)),
        error=f"Prometheus: {', '.join(gpu.unreadable)}" if gpu.unreadable else None,
    )


def _number(value: Any) -> float | None:
    """An instant vector sample [time, "value"] as a float (NaN and infinities included:
    Prometheus writes them "NaN", "+Inf"); None when absent."""
    try:
        return float(value[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def _bytes(mib: float | None) -> int | None:
    """MiB as bytes; None for a value no GPU can hold (negative, or past 2^64 bytes)."""
    if mib is None or not 0 <= mib * MiB < 2**64:
        return None
    return round(mib * MiB)


def _kind(value: Any) -> str:
    """What a JSON value is, in words ("a list", "a number")."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value), "a number")


def _json(payload: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):  # json recurses once per level
        return None
    return data if isinstance(data, dict) else None


class _Redirected(urllib.error.HTTPError):
    """A redirect the source refused; `origin` is where it pointed (scheme, host, port only:
    a redirect's path or query may carry what the server put there)."""

    def __init__(self, code: int, origin: str) -> None:
        super().__init__("", code, "redirect refused", Message(), None)
        self.origin = origin


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect. urllib's own handler follows one with the request's headers,
    Authorization included, to any host, even from https to http (Lib/urllib/request.py
    HTTPRedirectHandler.redirect_request copies every header but the content ones); and the
    query is a POST, which a redirect turns into a GET without its body anyway."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        parts = urllib.parse.urlsplit(newurl)
        origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else "?"
        raise _Redirected(code, shown(origin))


def _one_line(value: object) -> str:
    return " ".join(str(value).split())[:300]


def authorization(
    token_file: str | None,
    basic_file: str | None,
    environ: Mapping[str, str] = os.environ,
) -> str | None:
    """The Authorization header from a file or the environment (files win); None without
    credentials. Raises ValueError for an unreadable file or two kinds at once."""
    token = _secret(token_file, "--bearer-token-file") if token_file else None
    basic = _secret(basic_file, "--basic-auth-file") if basic_file else None
    token_from, basic_from = f"--bearer-token-file {token_file}", f"--basic-auth-file {basic_file}"
    if token is None and basic is None:
        token = environ.get(TOKEN_ENV) or None
        basic = environ.get(BASIC_AUTH_ENV) or None
        token_from, basic_from = f"${TOKEN_ENV}", f"${BASIC_AUTH_ENV}"
    if token is not None and basic is not None:
        raise SourceError("give a bearer token or basic auth, not both")
    if token is not None:
        token = token.strip()
        # RFC 6750 sec. 2.1: a bearer token is visible ASCII (b64token); anything else would
        # break the header, or inject one after a line break
        if not token or not all("!" <= c <= "~" for c in token):
            raise SourceError(
                f"{token_from}: not a bearer token (empty, or holds a space, a line break or "
                "another character outside visible ASCII)"
            )
        return f"Bearer {token}"
    if basic is not None:
        basic = basic.strip()
        if ":" not in basic:
            raise SourceError(f"{basic_from}: basic auth must read user:password")
        if any(c < " " or c == "\x7f" for c in basic):
            raise SourceError(f"{basic_from}: holds a line break or another control character")
        return "Basic " + base64.b64encode(basic.encode()).decode()
    return None


def _secret(path: str, flag: str) -> str:
    """A credential file's text, through the one bounded reader (a regular file of at most
    `memtui.bounded.TOKEN`, opened without waiting on a FIFO's writer)."""
    from memtui.bounded import TOKEN, read_bytes

    data = read_bytes(path, TOKEN, SourceError, f"{flag} {shown(path)}")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SourceError(f"{flag} {shown(path)}: not UTF-8 text") from None


def slurm_job(job: str, timeout_s: float = SLURM_TIMEOUT_S) -> tuple[list[str], float | None]:
    """The nodes of a Slurm job and when it started, from `squeue` (bounded in time and
    output: `run_bounded`)."""
    squeue = shutil.which("squeue")
    if squeue is None:
        raise OSError("squeue is not on PATH")
    out = run_bounded([squeue, "-h", "-j", job, "-o", "%N|%S"], timeout_s, MAX_SLURM_BYTES)
    line = out.strip().splitlines()[0] if out.strip() else ""
    nodes, _, start = line.partition("|")
    try:
        since: float | None = datetime.fromisoformat(start.strip()).timestamp()
    except ValueError:  # "N/A" before it starts
        since = None
    return expand_hostlist(nodes.strip()) if nodes.strip() else [], since


def run_bounded(argv: Sequence[str], timeout_s: float, max_bytes: int) -> str:
    """An external command's output, read at most `max_bytes` and waited for at most
    `timeout_s` (the command is killed past either); OSError naming the command when it
    fails, hangs or says too much (its first line of stderr, escaped, when it fails)."""
    name = os.path.basename(argv[0])
    deadline = time.monotonic() + timeout_s
    with subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = bytearray(), bytearray()
        streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        try:
            while streams:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OSError(f"{name} did not answer within {timeout_s:g} s")
                ready, _, _ = select.select(list(streams), [], [], left)
                for fd in ready:
                    chunk = os.read(fd, 65536)
                    if chunk:
                        streams[fd].extend(chunk)
                    else:
                        del streams[fd]
                if len(out) > max_bytes or len(err) > max_bytes:
                    raise OSError(f"{name} printed over {max_bytes // 2**10} KiB")
            code = proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            raise OSError(f"{name} did not exit within {timeout_s:g} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
    if code != 0:
        first = err.decode(errors="replace").strip().splitlines()[:1]
        said = f": {shown(first[0], 120)}" if first else ""
        raise OSError(f"{name} exited with status {code}{said}")
    return out.decode(errors="replace")
