"""Whether the Hugging Face hub can be asked at all. Without a network, transformers and
datasets ask it several times with backoff (about 50 s) before saying so; one connection
attempt says it in a moment, and the caller can then read only what is cached or say
plainly what to give instead. Used by model loading (backends) and hub datasets (data)."""

from __future__ import annotations

import os

from copyprobe.errors import one_line

PROBE_SECONDS = 3.0


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
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except (OSError, ValueError) as exc:  # ValueError: a host name IDNA cannot encode ("a..b")
        return f"{host}: {one_line(exc)}"
    return None
