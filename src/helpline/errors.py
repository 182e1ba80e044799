"""Domain exceptions. They carry a stable ``code``; the HTTP mapping lives in ``api.errors``."""

from __future__ import annotations

from typing import Any


class HelplineError(Exception):
    """Base of every error the service raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class NotFound(HelplineError):
    """The object does not exist, or belongs to another team (indistinguishable on purpose)."""

    code = "not_found"


class Conflict(HelplineError):
    """The request clashes with the current state of the object."""

    code = "conflict"


class InvalidRequest(HelplineError):
    """The request is well-formed JSON but breaks a rule of the interface."""

    code = "validation_error"


class Unauthorized(HelplineError):
    """Missing, unknown or revoked credentials."""

    code = "unauthorized"


class IdempotencyKeyReused(HelplineError):
    """An Idempotency-Key was reused with a different request."""

    code = "idempotency_key_reused"


class IdempotencyKeyInUse(HelplineError):
    """The first request with this Idempotency-Key is still being processed."""

    code = "idempotency_key_in_use"
