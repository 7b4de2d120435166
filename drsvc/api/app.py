"""The FastAPI application: routes, authentication, metrics; no logic of its own (the handlers
call :class:`drsvc.api.service.ApiService`).

No ``from __future__ import annotations`` here: FastAPI reads the handlers' annotations at run
time, and those name the dependencies built inside :func:`create_app`.
"""

from collections.abc import Awaitable, Callable
from functools import cache
from importlib.resources import files
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from drsvc.api.auth import ApiAuth
from drsvc.api.problems import ApiProblem, install_problem_handlers
from drsvc.api.service import ApiService, MoveRequest
from failover.failover_plan import FailoverKind
from failover.naming import REQUEST_ID_PATTERN, check_request_id

__all__ = ["MoveBody", "create_app"]

_NAME = r"^[A-Za-z0-9._-]{1,249}$"

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {}}}
    for code, text in (
        (400, "Malformed request"),
        (401, "No bearer token"),
        (403, "Wrong token, or changes are disabled"),
        (404, "Unknown application, cluster, group or failover"),
        (409, "Refused: a failover of the application is running, or the plan refuses"),
        (422, "Invalid request"),
        (503, "Consul or a needed cluster is unreachable"),
    )
}

#: a failover or failback can also be refused because the plan the caller saw has changed
_MOVE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    409: {
        "description": "Refused: a failover of the application is running, the plan refuses "
        "(a planned failover whose active cluster does not answer, ...), or the request id "
        "already named a different request of the application",
        "content": {"application/json": {}},
    },
    412: {
        "description": "expect_kind or expect_epoch no longer hold: the situation changed "
        "since the dry run; ask for a new one",
        "content": {"application/json": {}},
    },
}


class MoveBody(BaseModel):
    """A failover or failback request."""

    model_config = ConfigDict(extra="forbid")

    to: str | None = Field(
        default=None,
        max_length=64,
        description="The cluster to move to (failback: the preferred cluster by default).",
    )
    dry_run: bool = Field(default=False, description="Answer with the plan; change nothing.")
    force: bool = Field(
        default=False,
        description="Unplanned: switch at the latest checkpoints without waiting for "
        "replication, even if the active cluster answers. Without it the failover is planned "
        "(nothing lost, nothing re-read) and refused (409) while the active cluster does not "
        "answer: it never turns unplanned on its own.",
    )
    request_id: str | None = Field(
        default=None,
        max_length=128,
        description="Your id for this request, per application: the same id with the same "
        "request twice is one failover; the same id with a different request is refused (409). "
        "1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.",
        json_schema_extra={"pattern": f"^{REQUEST_ID_PATTERN.pattern}$"},
    )
    expect_kind: Literal["planned", "unplanned"] | None = Field(
        default=None,
        description="`planned` or `unplanned`: refuse (412) unless the failover that would run "
        "now is of this kind; send back the `kind` of the dry run you looked at.",
    )
    expect_epoch: int | None = Field(
        default=None,
        ge=0,
        le=2**62,
        description="Refuse (412) unless the application's active cluster document still has "
        "this epoch (nothing moved it since): send back the `epoch` of the dry run you looked at.",
    )

    @field_validator("request_id")
    @classmethod
    def _request_id_rule(cls, value: str | None) -> str | None:
        # the one rule of the CLI and the executor: the id becomes part of a Consul key
        return None if value is None else check_request_id(value)


class MigrationStartBody(BaseModel):
    """Start (or resume) a migration."""

    model_config = ConfigDict(extra="forbid")

    take_over_mm2: bool = Field(
        default=False,
        description="Continue where a stopped MirrorMaker 2 (identity names) left its copy.",
    )
    copy_here: bool = Field(
        default=True,
        description="Copy on a thread of this API process (false: only create the topics and"
        " record the start; drsvc migrate start copies elsewhere).",
    )


class CutoverBody(BaseModel):
    """Cut one application of a migration over to its target."""

    model_config = ConfigDict(extra="forbid")

    app: str = Field(max_length=249, pattern=_NAME, description="The application.")
    dry_run: bool = Field(default=False, description="Check and answer with the plan only.")
    wait_s: float = Field(
        default=10.0,
        ge=0,
        le=60,
        description="How long the check waits for the copy to reach the source's end.",
    )


class FinishBody(BaseModel):
    """Finish a migration: stop its copy for good (nothing is deleted)."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = Field(default=False, description="Check only; change nothing.")


def _add_migrations(app: FastAPI, service: ApiService, read: list[Any], write: list[Any]) -> None:
    """``/v1/migrations/...``: the same operations as ``drsvc migrate`` (docs/migration.md)."""
    Name = Annotated[str, Path(pattern=_NAME, description="A migration of the topology.")]

    @app.get("/v1/migrations", tags=["migrations"], dependencies=read, responses=_ERRORS)
    def migrations() -> list[dict[str, Any]]:
        """Every migration of the topology and its state."""
        return service.migrations.list()

    @app.get("/v1/migrations/{name}", tags=["migrations"], dependencies=read, responses=_ERRORS)
    def migration(name: Name) -> dict[str, Any]:
        """State, the copy per partition (the flow's group: current offset, log end, lag) and
        each application's phase."""
        return service.migrations.status(name)

    @app.get(
        "/v1/migrations/{name}/plan", tags=["migrations"], dependencies=read, responses=_ERRORS
    )
    def plan(name: Name) -> dict[str, Any]:
        """What the target gets per source topic: create, match, conflict (with the reason) or
        skip. Changes nothing."""
        return service.migrations.plan(name)

    @app.post(
        "/v1/migrations/{name}/start",
        tags=["migrations"],
        dependencies=write,
        status_code=202,
        responses=_ERRORS,
    )
    def start(name: Name, body: MigrationStartBody | None = None) -> dict[str, Any]:
        """Create the planned topics (409 naming the conflicts, creating nothing, when the plan
        has one), record the start and copy on a thread of this process."""
        given = body or MigrationStartBody()
        return service.migrations.start(name, given.take_over_mm2, given.copy_here)

    @app.post(
        "/v1/migrations/{name}/cutover",
        tags=["migrations"],
        dependencies=write,
        status_code=202,
        responses=_ERRORS,
    )
    def cutover(name: Name, body: CutoverBody) -> JSONResponse:
        """Cut ``app`` over as a planned failover: 409 with every reason while anything lags
        (nothing changes); 202 with the failover record (follow the Location); 200 with the
        plan for a dry run."""
        status, doc = service.migrations.cutover(name, body.app, body.dry_run, body.wait_s)
        headers = {} if status == 200 else {"Location": f"/v1/failovers/{doc['id']}"}
        return JSONResponse(doc, status_code=status, headers=headers)

    @app.post(
        "/v1/migrations/{name}/finish", tags=["migrations"], dependencies=write, responses=_ERRORS
    )
    def finish(name: Name, body: FinishBody | None = None) -> dict[str, Any]:
        """Stop the copy for good once every application is on the target (409 otherwise).
        Nothing is deleted on either cluster."""
        return service.migrations.finish(name, (body or FinishBody()).dry_run)

    @app.post(
        "/v1/migrations/{name}/verify", tags=["migrations"], dependencies=write, responses=_ERRORS
    )
    def verify(name: Name) -> dict[str, Any]:
        """Run the Spark comparison of source and target (per partition and per group) and
        answer with the verdict; takes as long as Spark does (tens of seconds)."""
        return service.migrations.verify(name)


@cache
def _requests_total() -> Counter:
    return Counter(
        "drsvc_api_requests",
        "API requests answered, by route and status code.",
        ["method", "route", "status"],
        registry=REGISTRY,
    )


def _add_dashboard(app: FastAPI) -> None:
    """The operator dashboard: one static page, no build step, that calls this API. The page
    holds no data, so it needs no token even with protected reads: its calls carry the token
    the operator types in."""

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", include_in_schema=False)
    def dashboard() -> HTMLResponse:
        page = files("drsvc.api").joinpath("static/dashboard.html").read_text(encoding="utf-8")
        return HTMLResponse(page)


def create_app(service: ApiService, auth: ApiAuth) -> FastAPI:
    app = FastAPI(
        title="drsvc",
        summary="Disaster recovery and failover for Apache Kafka",
        version="1",
    )
    install_problem_handlers(app)
    bearer = HTTPBearer(auto_error=False, description="The API token (DRSVC_API_TOKEN).")
    requests_total = _requests_total()

    def reader(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        auth.check(None if credentials is None else credentials.credentials, mutating=False)

    def writer(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        auth.check(None if credentials is None else credentials.credentials, mutating=True)

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        requests_total.labels(request.method, path, str(response.status_code)).inc()
        return response

    read = [Depends(reader)]
    Exposure = Annotated[
        bool,
        Query(
            description="Per group, what a failover now would lose or re-read (asks the "
            "clusters; false: only the active cluster, from Consul, fast)."
        ),
    ]
    AppName = Annotated[str, Path(pattern=_NAME, description="An application of the topology.")]

    _add_dashboard(app)
    _add_migrations(app, service, read, [Depends(writer)])

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: _ERRORS[503]})
    def readyz() -> dict[str, Any]:
        """Consul answers and has a leader."""
        return service.readiness()

    @app.get("/v1/clusters", tags=["clusters"], dependencies=read, responses=_ERRORS)
    def clusters() -> list[dict[str, Any]]:
        """Reachability from this API, Consul's checks, heartbeat freshness per vantage point."""
        return service.clusters()

    @app.get("/v1/flows", tags=["flows"], dependencies=read, responses=_ERRORS)
    def flows() -> dict[str, Any]:
        """Per flow and partition: replicated offset, end, lag; per flow: heartbeat freshness."""
        return service.flows()

    @app.get("/v1/apps", tags=["apps"], dependencies=read, responses=_ERRORS)
    def apps(exposure: Exposure = True) -> dict[str, Any]:
        """Every application's active cluster and epoch; the controller's leader."""
        return service.apps(exposure)

    @app.get("/v1/apps/{app}", tags=["apps"], dependencies=read, responses=_ERRORS)
    def one_app(app: AppName, exposure: Exposure = True) -> dict[str, Any]:
        """Active cluster, epoch, and per group what a failover now would lose or re-read."""
        return service.app(app, exposure)

    @app.get("/v1/apps/{app}/groups/{group}", tags=["apps"], dependencies=read, responses=_ERRORS)
    def group(
        app: AppName,
        group: Annotated[str, Path(pattern=_NAME, description="A group of the application.")],
    ) -> dict[str, Any]:
        """The group's checkpoints per partition, and its exposure to a failover now."""
        return service.group(app, group)

    def move(app: str, body: MoveBody | None, failback: bool) -> JSONResponse:
        given = body or MoveBody()
        status, doc = service.move(
            MoveRequest(
                app,
                given.to,
                given.dry_run,
                given.force,
                given.request_id,
                failback,
                expect_kind=None if given.expect_kind is None else FailoverKind(given.expect_kind),
                expect_epoch=given.expect_epoch,
            )
        )
        headers = {} if status == 200 else {"Location": f"/v1/failovers/{doc['id']}"}
        return JSONResponse(doc, status_code=status, headers=headers)

    @app.post(
        "/v1/apps/{app}/failover",
        tags=["failovers"],
        dependencies=[Depends(writer)],
        status_code=202,
        responses=_MOVE_ERRORS,
    )
    def failover(app: AppName, body: MoveBody) -> JSONResponse:
        """Move the application to ``to``: 202 with the failover record (it runs on; follow
        the Location), or 200 with the plan for a dry run (its ``kind`` and the application's
        ``epoch``: send them back as ``expect_kind`` and ``expect_epoch`` to run that plan and
        no other, 412 if the situation changed)."""
        return move(app, body, failback=False)

    @app.post(
        "/v1/apps/{app}/failback",
        tags=["failovers"],
        dependencies=[Depends(writer)],
        status_code=202,
        responses=_MOVE_ERRORS,
    )
    def failback(app: AppName, body: MoveBody | None = None) -> JSONResponse:
        """Move the application back to its preferred cluster (or ``to``)."""
        return move(app, body, failback=True)

    @app.get("/v1/failovers", tags=["failovers"], dependencies=read, responses=_ERRORS)
    def failovers() -> list[dict[str, Any]]:
        """Every failover of the namespace, oldest first."""
        return service.failovers()

    @app.get(
        "/v1/failovers/{failover_id}", tags=["failovers"], dependencies=read, responses=_ERRORS
    )
    def one_failover(failover_id: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
        """One failover's record: steps, groups, what was not replicated."""
        return service.failover(failover_id)

    @app.get("/v1/events", tags=["events"], dependencies=read, responses=_ERRORS)
    def events(
        after: Annotated[int, Query(ge=0, le=2**62, description="The last event id seen.")] = 0,
        wait_s: Annotated[
            float, Query(ge=0, le=30, description="Long-poll: wait this long for a new event.")
        ] = 0,
    ) -> dict[str, Any]:
        """Failover steps as they are recorded, after event ``after`` (long-poll)."""
        found = service.wait_events(after, wait_s)
        return {
            "events": [e.as_dict() for e in found],
            "last_id": found[-1].id if found else after,
        }

    @app.get("/metrics", tags=["metrics"], dependencies=read, response_class=Response)
    def metrics() -> Response:
        """Prometheus metrics of this process."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    _ = ApiProblem  # raised by the service and auth, answered by the handlers above
    return app
