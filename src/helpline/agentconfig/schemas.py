"""Request and response bodies of the agent repository's JSON API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from helpline.agentconfig.service import check_branch_name, check_file_path

MAX_FILES_PER_COMMIT = 500
MAX_FILE_CHARACTERS = 1_000_000

Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
BranchName = Annotated[
    str, StringConstraints(min_length=1, max_length=200), AfterValidator(check_branch_name)
]
FilePath = Annotated[str, AfterValidator(check_file_path)]
FileText = Annotated[str, StringConstraints(max_length=MAX_FILE_CHARACTERS)]


class CommitCreate(BaseModel):
    """A commit made through the API: file contents by path, ``null`` deletes a file."""

    model_config = ConfigDict(extra="forbid")

    branch: BranchName = Field(description="Branch to commit to, e.g. `main`.")
    message: Annotated[str, StringConstraints(min_length=1, max_length=1000)] = Field(
        description="Commit message."
    )
    parent_sha: Sha | None = Field(
        default=None,
        description="The branch head this change was made on; 409 `branch_moved` when the "
        "branch has moved since. For a new branch: the commit it starts from. Omitted: on top "
        "of the current head (a new branch starts from `main`).",
    )
    files: Annotated[dict[FilePath, FileText | None], Field(max_length=MAX_FILES_PER_COMMIT)] = (
        Field(description="Path (relative, `/`-separated) -> new text, or null to delete.")
    )


class CommitCreated(BaseModel):
    """The commit that was made."""

    commit_sha: str
    branch: str
    parent_sha: str | None


class Branch(BaseModel):
    """A branch and the commit it points at."""

    name: str
    commit_sha: str


class BranchList(BaseModel):
    """Every branch of the repository, by name."""

    data: list[Branch]


class CommitOut(BaseModel):
    """A commit of the history."""

    sha: str
    message: str
    parents: list[str]
    author: str
    created_at: datetime


class CommitPage(BaseModel):
    """A page of a branch's history, newest first."""

    data: list[CommitOut]
    has_more: bool


class FilesOut(BaseModel):
    """The files of a commit (UTF-8 text; undecodable bytes become U+FFFD)."""

    ref: str
    commit_sha: str
    files: dict[str, str]


class ValidationIssue(BaseModel):
    """One configuration problem; ``field`` is empty when the whole file is concerned."""

    file: str
    field: str
    message: str


class ValidationOut(BaseModel):
    """Whether the configuration at a ref is valid, and every problem found."""

    ref: str
    commit_sha: str
    valid: bool
    errors: list[ValidationIssue]
