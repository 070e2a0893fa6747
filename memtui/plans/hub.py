"""A model's config.json from the Hugging Face Hub, when neither a path, the local cache nor
the catalog knows the repo id: `fetch_config` is the `memtui.estimator.model_source.ConfigFetch`
that the commands, the plan readers and the model picker hand to `resolve_model`.

Only config.json is asked for, never weights, through huggingface_hub's own client
(file_download.py, the same calls from 1.0 to 2.4.0): `get_hf_file_metadata` first (one HEAD of
`{endpoint}/{repo}/resolve/main/config.json`, no retry: its size is checked before anything is
downloaded), then `hf_hub_download`, which stores the file in the Hugging Face cache as every
other client does (`models--org--name/snapshots/{commit}/config.json`, refs/main), where the
next `resolve_model` finds it offline. The environment is read at call time, as the user's
shell has it: HF_HUB_OFFLINE (not asked at all), HF_ENDPOINT (a mirror), HF_TOKEN (read by
huggingface_hub's get_token for each request), HF_HUB_ETAG_TIMEOUT (the seconds one request
may wait; huggingface_hub's default of 10 is cut to 5 here), and the cache folder of
`memtui.estimator.model_source.hub_cache_dir`.

Every answer is bounded: the whole exchange runs in a daemon thread given three timeouts in
all (hf_hub_download retries a timed-out HEAD for up to 60 s, `_ETAG_RETRY_TIMEOUT`, which a
user waiting on one model id should not), a config.json over 1 MiB is refused from the size
the HEAD states, and every failure is one line naming the repo and what to do.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from memtui.errors import one_line
from memtui.estimator.configs import ModelConfigError
from memtui.estimator.model_source import HubMiss, hub_cache_dir

MAX_CONFIG_BYTES = 1 << 20
"""The largest config.json fetched (the biggest real ones, multimodal with text_config and
vision_config, are under 20 kB)."""
DEFAULT_TIMEOUT_S = 5.0
"""Seconds one request may wait when HF_HUB_ETAG_TIMEOUT is not set."""

_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub constants.py _is_true


def offline() -> bool:
    """HF_HUB_OFFLINE (or transformers' TRANSFORMERS_OFFLINE) set to a true value, read as
    huggingface_hub's constants.py reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in _TRUE


def _timeout() -> float:
    text = os.environ.get("HF_HUB_ETAG_TIMEOUT", "")
    try:
        seconds = float(text)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_S


def _endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def fetch_config(repo_id: str) -> Path:
    """The path of `repo_id`'s config.json, downloaded into the Hugging Face cache.

    Raises HubMiss when the Hub is not to be asked (HF_HUB_OFFLINE, not a repo id) or has no
    such repo, and ModelConfigError (one line) when it refuses (gated, private), fails, or
    does not answer in time.
    """
    if offline():
        raise HubMiss("and HF_HUB_OFFLINE is set, so the Hub was not asked")
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except ValueError:  # HFValidationError
        raise HubMiss("and not a Hugging Face repo id") from None
    timeout = _timeout()
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["path"] = _download(repo_id, timeout)
        except Exception as err:  # handed to the caller's thread, which words it
            result["error"] = err

    worker = threading.Thread(target=run, name=f"hub-config-{repo_id}", daemon=True)
    worker.start()
    worker.join(3 * timeout)
    if worker.is_alive():
        raise _no_answer(repo_id, timeout)
    if "error" in result:
        raise _worded(repo_id, result["error"], timeout)
    return Path(result["path"])


def _download(repo_id: str, timeout: float) -> str:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    endpoint = _endpoint()
    url = hf_hub_url(repo_id, "config.json", endpoint=endpoint)
    meta = get_hf_file_metadata(url, timeout=timeout)
    if meta.size is None or meta.size > MAX_CONFIG_BYTES:
        size = "no size" if meta.size is None else f"{meta.size:,} bytes"
        raise ModelConfigError(
            f"{repo_id}: the Hub's config.json states {size}; memtui reads at most "
            f"{MAX_CONFIG_BYTES:,} bytes"
        )
    return str(
        hf_hub_download(
            repo_id,
            "config.json",
            cache_dir=str(hub_cache_dir()),
            endpoint=endpoint,
            etag_timeout=timeout,
        )
    )


def _no_answer(repo_id: str, timeout: float) -> ModelConfigError:
    return ModelConfigError(
        f"{repo_id}: the Hub at {_endpoint()} did not answer within {timeout:g} s",
        "check the connection (or HF_ENDPOINT), or give the model's config.json",
    )


def _worded(repo_id: str, err: Exception, timeout: float) -> Exception:
    """The one-line error (or HubMiss) for what huggingface_hub raised. Its error classes are
    imported from huggingface_hub.utils, where every version since 0.23 exports them; the HTTP
    library below it (requests, httpx, httpx2 by version) is told apart by its class names."""
    from huggingface_hub.utils import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    if isinstance(err, (ModelConfigError, HubMiss)):
        return err
    if isinstance(err, GatedRepoError):  # a RepositoryNotFoundError: tested first
        return ModelConfigError(
            f"{repo_id}: a gated repo, its config.json is refused ({_status(err)})",
            "accept its licence on the Hub and set HF_TOKEN to a token of that account",
        )
    if isinstance(err, RepositoryNotFoundError):
        # the Hub answers 401 for a private repo and for a missing one alike
        private = " (or it is private: set HF_TOKEN)" if _status(err) == "401" else ""
        return HubMiss(f"and the Hub has no repo {repo_id!r}{private}")
    if _timed_out(err):
        return _no_answer(repo_id, timeout)
    if isinstance(err, LocalEntryNotFoundError) or not isinstance(err, HfHubHTTPError | OSError):
        # hf_hub_download's word for a HEAD that failed (its __cause__), or the HTTP
        # library's own connection error
        cause = err.__cause__ or err
        return HubMiss(
            f"and the Hub at {_endpoint()} cannot be reached ({type(cause).__name__}; "
            "HF_HUB_OFFLINE=1 skips it)"
        )
    if isinstance(err, EntryNotFoundError):
        return ModelConfigError(f"{repo_id}: the repo has no config.json on the Hub")
    if isinstance(err, HfHubHTTPError):
        return ModelConfigError(f"{repo_id}: the Hub answered {_status(err)} for its config.json")
    # an OSError: the cache not writable, a download whose size does not match the HEAD's
    return ModelConfigError(f"{repo_id}: cannot store its config.json ({one_line(err)})")


def _timed_out(err: BaseException | None) -> bool:
    """Whether `err` or what caused it is the HTTP library's timeout (ReadTimeout,
    ConnectTimeout, TimeoutException, by whichever library huggingface_hub runs on)."""
    while err is not None:
        if isinstance(err, TimeoutError) or "Timeout" in type(err).__name__:
            return True
        err = err.__cause__
    return False


def _status(err: Any) -> str:
    response = getattr(err, "response", None)
    return str(getattr(response, "status_code", "an error"))
