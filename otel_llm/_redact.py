"""Keep secrets out of messages: API keys and Authorization values never leave in text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qs, unquote, urlsplit

_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"(?i)(api[_-]?key|authorization|x-api-key)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'<>]+@"),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secrets and key-like tokens replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)} [REDACTED]", text)
    text = _PATTERNS[1].sub("[REDACTED]", text)
    text = _PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
    return _PATTERNS[3].sub(lambda m: f"{m.group(1)}[REDACTED]@", text)


def redact_url(url: str) -> str:
    """``url`` fit for a message: the password (or a token standing alone in the user
    information) and the query replaced; the rest stays readable."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:[REDACTED]@{host}" if has_password else f"[REDACTED]@{host}"
    query = "?[REDACTED]" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}" if parts.scheme else "[REDACTED]"


def public_url(url: str) -> str:
    """``url`` as a message names an endpoint: scheme, host, port and path, without the user
    information (a password is a secret, and a user name standing alone is a token) and with the
    query replaced."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    query = "?[REDACTED]" if parts.query else ""
    return f"{parts.scheme}://{host}{parts.path}{query}" if parts.scheme else "[REDACTED]"


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a URL carries (its password — or a user name standing alone, a token — raw
    and unquoted, and a ``password`` query value), to redact wherever text leaves the library."""
    try:
        parts = urlsplit(url)
        token = parts.username if parts.password is None else None
        found = [parts.password, token, *parse_qs(parts.query).get("password", [])]
    except ValueError:
        return ()
    return tuple(dict.fromkeys(form for p in found if p for form in (p, unquote(p))))
