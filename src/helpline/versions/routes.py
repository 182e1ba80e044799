"""``/v1/agent-versioning``: list, publish, split traffic, archive."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from helpline.api.deps import OptionalIdempotencyKey, SessionDep, TeamDep
from helpline.api.idempotency import run_idempotent_request
from helpline.api.pagination import PageRequest
from helpline.api.responses import JSONBody, outcome_response
from helpline.versions import service
from helpline.versions.schemas import (
    AgentVersionOut,
    AgentVersionPage,
    PublishRequest,
    TrafficRequest,
    TrafficResponse,
)

router = APIRouter(prefix="/v1/agent-versioning", tags=["agent versions"])


@router.get("/versions", response_model=AgentVersionPage)
async def list_versions(
    session: SessionDep,
    identity: TeamDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    before: Annotated[str | None, Query(min_length=1)] = None,
    after: Annotated[str | None, Query(min_length=1)] = None,
    has_traffic: bool = False,
) -> JSONBody:
    """Lists non-archived agent versions, newest first (created_at desc, then id desc)."""
    page = await service.list_versions(
        session=session,
        team_id=identity.team_id,
        page=PageRequest(limit=limit, before=before, after=after),
        has_traffic=has_traffic,
    )
    return JSONBody({"data": [service.version_dict(r) for r in page.rows],
                     "has_more": page.has_more})


@router.post("/versions", status_code=201, response_model=AgentVersionOut)
async def publish_version(
    body: PublishRequest,
    request: Request,
    session: SessionDep,
    identity: TeamDep,
    idempotency_key: OptionalIdempotencyKey,
) -> JSONBody:
    """Publishes a staging-main commit as a new numbered version."""

    async def work() -> dict[str, object]:
        version = await service.publish_version(
            session=session, team_id=identity.team_id,
            commit_sha=body.staging_commit_sha, description=body.description,
        )
        return JSONBody.jsonable(service.version_dict(version))

    return outcome_response(await run_idempotent_request(
        request=request, session=session, team_id=identity.team_id, key=idempotency_key,
        body=body.model_dump(), status_code=201, work=work,
    ))


@router.post("/versions/traffic", response_model=TrafficResponse)
async def set_traffic(
    body: TrafficRequest,
    request: Request,
    session: SessionDep,
    identity: TeamDep,
    idempotency_key: OptionalIdempotencyKey,
) -> JSONBody:
    """Sets the full traffic split; versions not listed receive 0 %."""

    async def work() -> dict[str, object]:
        applied = await service.set_traffic(
            session=session, team_id=identity.team_id,
            allocation=[(a.agent_version_id, a.percent_traffic) for a in body.traffic_allocation],
        )
        return {"traffic_allocation": [
            {"agent_version_id": version_id, "percent_traffic": percent}
            for version_id, percent in applied
        ]}

    return outcome_response(await run_idempotent_request(
        request=request, session=session, team_id=identity.team_id, key=idempotency_key,
        body=body.model_dump(), status_code=200, work=work,
    ))


@router.delete("/versions/{version_id}", status_code=204, response_class=Response)
async def archive_version(version_id: str, session: SessionDep, identity: TeamDep) -> Response:
    """Archives a version that has no traffic (409 while it has some)."""
    await service.archive_version(session=session, team_id=identity.team_id,
                                  version_id=version_id)
    await session.commit()
    return Response(status_code=204)
