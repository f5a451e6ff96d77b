"""API keys and the tenants they name.

A key names a tenant; a request belongs to the tenant of its key.  Keys come from
`--api-key KEY` (tenant `default`), `--api-key NAME=KEY`, `--admin-key NAME=KEY`,
and a keys file (`--api-keys FILE`): one key a line, `NAME KEY` or `NAME KEY admin`,
`#` starting a comment.  A tenant may have several keys (to change one without a
gap); a key names one tenant only.  Without any key, every client is one tenant that
sees everything: one trust domain, as on a loopback port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from presto_tui.errors import InputError
from presto_tui.safetext import visible

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
DEFAULT = "default"  # the tenant of a bare --api-key KEY


@dataclass(frozen=True)
class Tenant:
    """Who sent a request: the name its key was given; an admin key sees every tenant's requests."""

    name: str
    admin: bool = False


ANYONE = Tenant("", admin=True)  # a server without keys is one trust domain


def _key(key: str, where: str) -> str:
    if not key.strip() or any(c.isspace() or not c.isprintable() for c in key):
        raise InputError(f"{where}: a key must be non-empty printable text without spaces")
    return key


def _named(text: str, flag: str) -> tuple[str, str]:
    name, sep, key = text.partition("=")
    if not sep or not NAME.fullmatch(name):
        raise InputError(f"{flag} takes NAME=KEY (NAME: 1 to 64 letters, digits or . _ -), got "
                         f"{visible(text[:20], keep_newlines=False)!r}...")
    return name, _key(key, f"{flag} {name}=...")


def key_table(api_keys: list[str] | None = None, admin_keys: list[str] | None = None,
              keys_file: Path | None = None) -> dict[str, Tenant]:
    """Every key's tenant (empty: no key needed); InputError (one line) for a malformed or repeated one."""
    table: dict[str, Tenant] = {}

    def add(key: str, tenant: Tenant, where: str) -> None:
        if key in table:
            raise InputError(f"{where}: this key is given twice (a key names one tenant)")
        table[key] = tenant

    for text in api_keys or []:
        if not text.strip():
            raise InputError("--api-key is empty (unset PRESTO_TUI_API_KEY, or give a key)")
        name, sep, _ = text.partition("=")
        if sep and NAME.fullmatch(name):
            name, key = _named(text, "--api-key")
            add(key, Tenant(name), f"--api-key {name}=...")
        else:
            add(_key(text, "--api-key"), Tenant(DEFAULT), "--api-key")
    for text in admin_keys or []:
        name, key = _named(text, "--admin-key")
        add(key, Tenant(name, admin=True), f"--admin-key {name}=...")
    if keys_file is not None:
        shown = visible(str(keys_file), keep_newlines=False)
        try:
            lines = keys_file.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise InputError(f"{shown}: cannot read the keys file ({e.strerror})") from None
        except UnicodeDecodeError:
            raise InputError(f"{shown}: the keys file is not UTF-8 text") from None
        before = len(table)
        for number, line in enumerate(lines, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            where = f"{shown}:{number}"
            if len(words) not in (2, 3) or (len(words) == 3 and words[2] != "admin") or not NAME.fullmatch(words[0]):
                raise InputError(f"{where}: a line is NAME KEY or NAME KEY admin (NAME: 1 to 64 letters, digits "
                                 "or . _ -)")
            add(_key(words[1], where), Tenant(words[0], admin=len(words) == 3), where)
        if len(table) == before:
            raise InputError(f"{shown}: no keys in the keys file (one a line: NAME KEY or NAME KEY admin)")
    return table
