"""Keep secrets out of messages: API keys and Authorization values never leave in text."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"(?i)(api[_-]?key|authorization|x-api-key)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secrets and key-like tokens replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)} [REDACTED]", text)
    text = _PATTERNS[1].sub("[REDACTED]", text)
    return _PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
