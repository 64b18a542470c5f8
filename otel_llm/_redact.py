"""Keep secrets out of messages: API keys and Authorization values never leave in text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qs, unquote, urlsplit

_URL = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?", re.S)
"""RFC 3986's own reading of a URI (appendix B): scheme, authority, path, query. It matches
any text, so a URL urllib refuses (``http://[::1``, a port that is not a number) can still be
shown without its secrets."""

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
    information) and the query replaced; the rest stays readable. Never raises: a URL that does
    not parse is shown as far as it reads, and one without a scheme (``127.0.0.1:4318``, the
    usual slip) as the host and port it names."""
    scheme, authority, path, query = _parts(url)
    netloc = authority or ""
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:[REDACTED]@{host}" if has_password else f"[REDACTED]@{host}"
    shown_query = "?[REDACTED]" if query else ""
    if scheme:
        return f"{scheme}://{netloc}{path}{shown_query}"
    # no scheme: the text is no URL at all, so key-like tokens in it go too
    return redact(f"{netloc}{path}{shown_query}") if netloc or path else "[REDACTED]"


def _parts(url: str) -> tuple[str, str | None, str, str]:
    """Scheme (lower case, "" when none), authority (None when none), path and query of
    ``url``; text without ``://`` is read as an authority (``host:port``), the form a URL
    without its scheme takes."""
    if "://" not in url:
        url = "//" + url.strip()
    match = _URL.match(url.strip())
    assert match is not None  # every group is optional: it matches any text
    scheme, authority, path, query = match.groups()
    return (scheme or "").lower(), authority, path, query or ""


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
    and unquoted, and a ``password`` query value), to redact wherever text leaves the library;
    read even from a URL urllib refuses."""
    _, authority, _, query = _parts(url)
    userinfo, at, _ = (authority or "").rpartition("@")
    user, has_password, password = userinfo.partition(":")
    token = user if at and not has_password else None
    found = [password if has_password else None, token, *parse_qs(query).get("password", [])]
    return tuple(dict.fromkeys(form for p in found if p for form in (p, unquote(p))))
