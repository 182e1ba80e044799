"""JSON endpoints of the agent repository: commit files, list branches and history, read files,
validate a ref."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from helpline.agentconfig import service
from helpline.agentconfig.schemas import (
    BranchList,
    CommitCreate,
    CommitCreated,
    CommitPage,
    FilesOut,
    Sha,
    ValidationOut,
)
from helpline.api.deps import OptionalIdempotencyKey, SessionDep, TeamDep
from helpline.api.idempotency import run_idempotent_request
from helpline.api.responses import JSONBody, outcome_response

router = APIRouter(prefix="/v1/agent-config", tags=["agent-config"])

RefQuery = Annotated[
    str,
    Query(min_length=1, max_length=300,
          description="Branch name, tag name, full ref name or full commit SHA."),
]


def _commit_dict(info: service.CommitInfo) -> dict[str, Any]:
    return {
        "sha": info.sha,
        "message": info.message,
        "parents": info.parents,
        "author": info.author,
        "created_at": info.created_at,
    }


@router.post("/commits", status_code=201, response_model=CommitCreated)
async def create_commit(
    body: CommitCreate,
    request: Request,
    session: SessionDep,
    identity: TeamDep,
    idempotency_key: OptionalIdempotencyKey,
) -> Response:
    """Commit file changes to a branch (null deletes a file); the same commit `git fetch` sees."""

    async def work() -> dict[str, Any]:
        result = await service.commit_files(
            session=session,
            team_id=identity.team_id,
            branch=body.branch,
            message=body.message,
            files=body.files,
            parent_sha=body.parent_sha,
        )
        return {"commit_sha": result.sha, "branch": result.branch,
                "parent_sha": result.parent_sha}

    return outcome_response(await run_idempotent_request(
        request=request, session=session, team_id=identity.team_id, key=idempotency_key,
        body=body.model_dump(mode="json"), status_code=201, work=work,
    ))


@router.get("/branches", response_model=BranchList)
async def list_branches(session: SessionDep, identity: TeamDep) -> Response:
    """Branches of the team's agent repository and their head commits."""
    branches = await service.list_branches(session=session, team_id=identity.team_id)
    return JSONBody({"data": [{"name": name, "commit_sha": sha} for name, sha in branches]})


@router.get("/commits", response_model=CommitPage)
async def list_commits(
    session: SessionDep,
    identity: TeamDep,
    branch: Annotated[str, Query(min_length=1, max_length=200)] = "main",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: Annotated[
        Sha | None,
        Query(description="Continue below this commit (the last `sha` of the previous page)."),
    ] = None,
) -> Response:
    """A branch's history, newest first (children before their parents)."""
    commits, has_more = await service.list_commits(
        session=session, team_id=identity.team_id, branch=branch, limit=limit, after=after
    )
    return JSONBody({"data": [_commit_dict(c) for c in commits], "has_more": has_more})


@router.get("/files", response_model=FilesOut)
async def read_files(session: SessionDep, identity: TeamDep, ref: RefQuery = "main") -> Response:
    """Every file of the repository at a branch, tag or commit."""
    sha, files = await service.read_ref_files(session=session, team_id=identity.team_id, ref=ref)
    return JSONBody({
        "ref": ref,
        "commit_sha": sha,
        "files": {path: data.decode("utf-8", "replace") for path, data in files.items()},
    })


@router.get("/validate", response_model=ValidationOut)
async def validate(session: SessionDep, identity: TeamDep, ref: RefQuery = "main") -> Response:
    """Validate the agent configuration at a branch, tag or commit."""
    result = await service.validate_ref(session=session, team_id=identity.team_id, ref=ref)
    return JSONBody({
        "ref": ref,
        "commit_sha": result.commit_sha,
        "valid": result.valid,
        "errors": [
            {"file": e.file, "field": e.field, "message": e.message} for e in result.errors
        ],
    })
