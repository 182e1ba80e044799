"""Random, prefixed, non-sequential identifiers (``ver_…``, ``sim_…``, ``conv_…``)."""

from __future__ import annotations

import secrets

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
_LENGTH = 24  # 36**24 ≈ 2**124: collisions are not a practical concern


def new_id(prefix: str) -> str:
    """A fresh id such as ``ver_3k9x…`` (prefix, underscore, 24 base-36 characters)."""
    return f"{prefix}_" + "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH))
