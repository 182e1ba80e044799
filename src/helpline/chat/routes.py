"""``POST /v1/chat/messages``: talk to the agent from a server (SMS, email, in-app bridges)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from helpline.agent.service import handle_user_message
from helpline.api.deps import OptionalIdempotencyKey, RuntimeDep, SessionDep, TeamDep
from helpline.api.idempotency import run_idempotent_request
from helpline.api.responses import JSONBody, outcome_response
from helpline.chat.schemas import ChatMessageIn
from helpline.conversations.service import message_dict
from helpline.jobs.app import defer_quietly

router = APIRouter(prefix="/v1/chat", tags=["chat"])


@router.post("/messages")
async def post_message(
    body: ChatMessageIn,
    request: Request,
    runtime: RuntimeDep,
    session: SessionDep,
    identity: TeamDep,
    idempotency_key: OptionalIdempotencyKey,
) -> JSONBody:
    """Sends a user's message to the agent and returns the replies it produced."""

    async def work() -> dict[str, object]:
        handled = await handle_user_message(
            session=session, services=runtime.agent, team_id=identity.team_id,
            user_id=body.user_id, text=body.text, metadata=body.metadata,
            user_token=body.user_token, replies_seen=True,
        )
        return JSONBody.jsonable({
            "conversation_id": handled.conversation.id,
            "messages": [message_dict(m) for m in handled.replies],
            "destination": handled.conversation.destination,
            "handoff": handled.handoff,
        })

    # The user token is a credential: it is not part of what identifies a retried request.
    identity_of_request = body.model_dump(exclude={"user_token"})
    outcome = await run_idempotent_request(
        request=request, session=session, team_id=identity.team_id, key=idempotency_key,
        body=identity_of_request, status_code=200, work=work,
    )
    if outcome.body.get("handoff") and not outcome.replayed:
        await defer_quietly(runtime.jobs, "deliver_webhooks", timestamp=0)
    return outcome_response(outcome)
