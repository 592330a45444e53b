"""Which values are credentials, and how they stay out of logs and error messages (pure).

A credential is the value of a key that names one (`...secret...`, `...password...`, `...token...`,
an account `key`, a `sas` signature, ...) anywhere in a mapping, or a secret written inside a URL
(a JDBC url's `password=`, `user:password@host`). The hook registers every one it is handed with
Airflow's secrets masker and masks them in the spark-submit command it logs; errors show specs with
them replaced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
_CREDENTIAL_WORDS = re.compile(r"secret|passw|token|credential|signature|private", re.IGNORECASE)
_CREDENTIAL_SEGMENTS = frozenset({"key", "sas", "sig", "pwd", "auth", "pass"})
_URL_SECRETS = (
    re.compile(r"(?i)\b(?:password|passwd|pwd|secret|token|sig|sas|accountkey)=([^;&\s'\"]+)"),
    re.compile(r"://[^/\s:@]+:([^@\s/]+)@"),  # scheme://user:password@host
)
_SHORTEST_SECRET = 3  # shorter values would mask ordinary text
_KEY_AND_VALUE = re.compile(r"^([^=:]*)[=:](.*)$", re.DOTALL)  # KEY=VALUE, or KEY:VALUE by mistake


def is_credential_key(key: Any) -> bool:
    """Whether a conf or option key names a credential (spark.hadoop.fs.s3a.session.token,
    fs.azure.account.key.<account>..., fs.azure.sas.<container>..., password, sfPassword, ...)."""
    lowered = str(key).lower()
    return bool(_CREDENTIAL_WORDS.search(lowered)) or bool(
        _CREDENTIAL_SEGMENTS & set(re.split(r"[^a-z0-9]+", lowered))
    )


def credential_values(value: Any) -> list[str]:
    """Every credential in a conf mapping, a source spec or a string, in the order found."""
    found: list[str] = []
    _collect(value, found)
    return [secret for secret in dict.fromkeys(found) if len(secret) >= _SHORTEST_SECRET]


def _collect(value: Any, found: list[str], key: Any = None) -> None:
    if isinstance(value, dict):
        for item_key, item in value.items():
            _collect(item, found, item_key)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found, key)
    elif value is not None and not isinstance(value, bool):
        text = str(value)
        if key is not None and is_credential_key(key):
            found.append(text)
        found.extend(m.group(1) for pattern in _URL_SECRETS for m in pattern.finditer(text))


def command_line_secrets(arguments: Iterable[str]) -> list[str]:
    """Every credential on a command line: the value of an argument `KEY=VALUE` (or `KEY:VALUE`, or
    `--option=KEY=VALUE`) whose key names a credential, the argument after such a key given alone, and
    the credentials inside arguments that are JSON or URLs. Option names are never keys."""
    found: list[str] = []
    after_key = False
    for argument in arguments:
        if after_key:
            found.append(argument)
        text = argument.split("=", 1)[1] if argument.startswith("-") and "=" in argument else argument
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            _collect(parsed, found)
        matched = _KEY_AND_VALUE.match(text)
        key, value = (matched.group(1), matched.group(2)) if matched else (text, "")
        named = not text.startswith("-") and parsed is None and is_credential_key(key)
        if named and value:
            found.append(value)
        after_key = named and not value
        _collect(text, found)
    return [secret for secret in dict.fromkeys(found) if len(secret) >= _SHORTEST_SECRET]


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """The text with every given secret replaced by the mask, longest first."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORTEST_SECRET:
            text = text.replace(secret, MASK)
    return text


def redacted(value: Any) -> Any:
    """A copy of a spec or mapping that is safe to show: credentials replaced by the mask."""
    if isinstance(value, dict):
        return {k: MASK if is_credential_key(k) and v is not None else redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted(v) for v in value)
    if isinstance(value, str):
        return redact_text(value, credential_values(value))
    return value
