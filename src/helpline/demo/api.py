"""A tiny fake order system for the demo agent's tools (``/demo-api/...``).

Deterministic: an order's status follows from its number, so a newcomer can try several
outcomes (A-10001 shipped, A-10002 processing, A-10003 delivered, A-10004 cancelled; numbers
ending in 0 do not exist). Not part of the product API: excluded from the OpenAPI description.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from helpline.api.responses import JSONBody

router = APIRouter(prefix="/demo-api", include_in_schema=False)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_STATUSES = ["shipped", "processing", "delivered", "cancelled"]


def order(number: str, today: date | None = None) -> dict[str, Any] | None:
    """The demo order with this five-digit number, or None for an unknown order."""
    if not re.fullmatch(r"\d{5}", number) or number.endswith("0"):
        return None
    today = today or date.today()
    status = _STATUSES[(int(number) - 1) % len(_STATUSES)]
    found: dict[str, Any] = {"order_number": f"A-{number}", "status": status}
    if status == "shipped":
        found.update(carrier="UPS", tracking_number=f"1Z999AA1{number}",
                     eta=(today + timedelta(days=2)).isoformat())
    elif status == "processing":
        found["ship_by"] = (today + timedelta(days=1)).isoformat()
    elif status == "delivered":
        found["delivered_at"] = (today - timedelta(days=1)).isoformat()
    return found


@router.get("/orders/A-{number}")
async def get_order(number: str) -> Response:
    """Look up a demo order."""
    found = order(number)
    if found is None:
        return JSONBody({"error": "order not found"}, status_code=404)
    return JSONBody(found)


@router.post("/plus/cancel")
async def cancel_plus(request: Request) -> Response:
    """Cancel a demo Acme Plus membership (addresses at example.org have none)."""
    try:
        body = await request.json()
    except ValueError:
        return JSONBody({"error": "invalid JSON"}, status_code=400)
    email = body.get("email") if isinstance(body, dict) else None
    if not isinstance(email, str) or not _EMAIL.match(email):
        return JSONBody({"error": "email required"}, status_code=400)
    if email.lower().endswith("@example.org"):
        return JSONBody({"error": "no Acme Plus membership"}, status_code=404)
    ends_on = (date.today() + timedelta(days=12)).isoformat()
    return JSONBody({"email": email, "cancelled": True, "ends_on": ends_on})
