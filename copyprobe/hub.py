"""Whether the Hugging Face hub can be asked at all. Without a network, transformers and
datasets ask it several times with backoff (about 50 s) before saying so; one connection
attempt says it in a moment, and the caller can then read only what is cached or say
plainly what to give instead. Used by model loading (backends) and hub datasets (data)."""

from __future__ import annotations

import os
import time

from copyprobe.errors import one_line

PROBE_SECONDS = 3.0
# a host found unreachable is not probed again for this long: an audit loads two models and
# an offline machine paid a probe (up to PROBE_SECONDS) for each
REMEMBER_UNREACHABLE_S = 60.0
_unreachable: dict[tuple[str, int], tuple[float, str]] = {}  # (host, port) -> (when, why)


def offline_by_env(*names: str) -> bool:
    """Whether any of the environment variables ``names`` is set true (1, true, yes, on:
    as huggingface_hub reads its own)."""
    return any(os.environ.get(name, "").strip().upper() in ("1", "TRUE", "YES", "ON") for name in names)


def hub_unreachable(timeout: float = PROBE_SECONDS) -> str | None:
    """Why the hub (``HF_ENDPOINT``, else huggingface.co) cannot be reached: a host that
    does not resolve, a refused or timed-out connection; None when it may be. Behind a
    proxy nothing is probed: the proxy may reach what a direct connection cannot (the
    proxies the hub's HTTP client reads: the environment's, and on macOS and Windows the
    system's, as urllib finds them)."""
    import socket
    from urllib.parse import urlsplit
    from urllib.request import getproxies

    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    try:
        url = urlsplit(endpoint)
        host, port = url.hostname, url.port or (80 if url.scheme == "http" else 443)
    except ValueError as exc:  # a port out of range, an unclosed [ipv6
        return f"HF_ENDPOINT {endpoint!r} is not a URL: {one_line(exc)}"
    proxies = getproxies()
    if proxies.get("all") or proxies.get("http" if url.scheme == "http" else "https"):
        return None
    if not host:  # "localhost:9" parses as a scheme
        return f"HF_ENDPOINT {endpoint!r} is not a URL (scheme://host[:port])"
    remembered = _unreachable.get((host, port))
    if remembered is not None and time.monotonic() - remembered[0] < REMEMBER_UNREACHABLE_S:
        return remembered[1]
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except (OSError, ValueError) as exc:  # ValueError: a host name IDNA cannot encode ("a..b")
        why = f"{host}: {one_line(exc)}"
        _unreachable[(host, port)] = (time.monotonic(), why)
        return why
    _unreachable.pop((host, port), None)
    return None


def forget_unreachable() -> None:
    """Probe every host again at the next call (a network that came back, a test)."""
    _unreachable.clear()
