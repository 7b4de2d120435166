"""The FastAPI application: routes, authentication, metrics; no logic of its own (the handlers
call :class:`drsvc.api.service.ApiService`).

Every handler is ``async``: the health probes answer in the event loop, the long-polls wait in
it, and blocking work goes to the bounded thread pools of :mod:`drsvc.api.limits`, never to the
server's shared pool.

From the outside in, a request passes: the security headers, the server's error handler, the
request counter, the host check (with ``allowed_hosts``), the request guard (token and body size,
before the body is read; :mod:`drsvc.api.guard`), then the route with its own token check.

No ``from __future__ import annotations`` here: FastAPI reads the handlers' annotations at run
time, and those name the dependencies built inside :func:`create_app`.
"""

from collections.abc import Sequence
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp

from drsvc.api.answers import FailoverAnswer
from drsvc.api.auth import ApiAuth, Caller
from drsvc.api.event_feed import EventFeed
from drsvc.api.events import EVENT_CURSOR, START
from drsvc.api.guard import RequestGuard, SecurityHeaders
from drsvc.api.limits import ApiLimits, Pool, ThreadPools
from drsvc.api.pages import add_pages
from drsvc.api.problems import ApiProblem, install_problem_handlers
from drsvc.api.request_metrics import RequestMetrics
from drsvc.api.service import ApiService, MoveRequest, requester
from failover.failover_plan import FailoverKind
from failover.naming import REQUEST_ID_PATTERN, check_request_id

__all__ = ["MoveBody", "create_app"]


_NAME = r"^[A-Za-z0-9._-]{1,249}$"

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {}}}
    for code, text in (
        (400, "Malformed request"),
        (401, "No bearer token"),
        (403, "Wrong token, a viewer's token on a change, or no token is configured"),
        (404, "Unknown application, cluster, group or failover"),
        (409, "Refused: a failover of the application is running, or the plan refuses"),
        (413, "The request body is larger than the API accepts (--max-body-bytes)"),
        (422, "Invalid request"),
        (503, "Consul or a needed cluster is unreachable"),
    )
}

#: a failover or failback can also be refused because the plan the caller saw has changed
_MOVE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    200: {"description": "Dry run: the plan, and the epoch it was made at"},
    202: {"description": "Started: the failover's record", "model": FailoverAnswer},
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


def _add_migrations(
    app: FastAPI, service: ApiService, pools: ThreadPools, read: list[Any], operator: Any
) -> None:
    """``/v1/migrations/...``: the same operations as ``drsvc migrate`` (docs/migration.md)."""
    Name = Annotated[str, Path(pattern=_NAME, description="A migration of the topology.")]
    Operator = Annotated[Caller, operator]
    write = [operator]

    @app.get("/v1/migrations", tags=["migrations"], dependencies=read, responses=_ERRORS)
    async def migrations() -> list[dict[str, Any]]:
        """Every migration of the topology and its state."""
        return await pools.run(Pool.READS, service.migrations.list)

    @app.get("/v1/migrations/{name}", tags=["migrations"], dependencies=read, responses=_ERRORS)
    async def migration(name: Name) -> dict[str, Any]:
        """State, the copy per partition (the flow's group: current offset, log end, lag) and
        each application's phase."""
        return await pools.run(Pool.READS, partial(service.migrations.status, name))

    @app.get(
        "/v1/migrations/{name}/plan", tags=["migrations"], dependencies=read, responses=_ERRORS
    )
    async def plan(name: Name) -> dict[str, Any]:
        """What the target gets per source topic: create, match, conflict (with the reason) or
        skip. Changes nothing."""
        return await pools.run(Pool.READS, partial(service.migrations.plan, name))

    @app.post(
        "/v1/migrations/{name}/start",
        tags=["migrations"],
        dependencies=write,
        status_code=202,
        responses=_ERRORS,
    )
    async def start(name: Name, body: MigrationStartBody | None = None) -> dict[str, Any]:
        """Create the planned topics (409 naming the conflicts, creating nothing, when the plan
        has one), record the start and copy on a thread of this process."""
        given = body or MigrationStartBody()
        return await pools.run(
            Pool.CHANGES,
            partial(service.migrations.start, name, given.take_over_mm2, given.copy_here),
        )

    @app.post(
        "/v1/migrations/{name}/cutover",
        tags=["migrations"],
        dependencies=write,
        status_code=202,
        responses=_ERRORS,
    )
    async def cutover(name: Name, body: CutoverBody, caller: Operator) -> JSONResponse:
        """Cut ``app`` over as a planned failover: 409 with every reason while anything lags
        (nothing changes); 202 with the failover record (follow the Location); 200 with the
        plan for a dry run."""
        status, doc = await pools.run(
            Pool.CHANGES,
            partial(
                service.migrations.cutover,
                name,
                body.app,
                body.dry_run,
                body.wait_s,
                requester(caller),
            ),
        )
        headers = {} if status == 200 else {"Location": f"/v1/failovers/{doc['id']}"}
        return JSONResponse(doc, status_code=status, headers=headers)

    @app.post(
        "/v1/migrations/{name}/finish", tags=["migrations"], dependencies=write, responses=_ERRORS
    )
    async def finish(name: Name, body: FinishBody | None = None) -> dict[str, Any]:
        """Stop the copy for good once every application is on the target (409 otherwise).
        Nothing is deleted on either cluster."""
        dry_run = (body or FinishBody()).dry_run
        return await pools.run(Pool.CHANGES, partial(service.migrations.finish, name, dry_run))

    @app.post(
        "/v1/migrations/{name}/verify", tags=["migrations"], dependencies=write, responses=_ERRORS
    )
    async def verify(name: Name) -> dict[str, Any]:
        """Run the Spark comparison of source and target (per partition and per group) and
        answer with the verdict; takes as long as Spark does (tens of seconds)."""
        return await pools.run(Pool.CHANGES, partial(service.migrations.verify, name))


#: ``exposure=true`` of the application pages
Exposure = Annotated[
    bool,
    Query(
        description="Per group, what a failover now would lose or re-read: asks the clusters, "
        "so it is computed at most once per application every --exposure-ttl-s (the answer's "
        "exposure_as_of_ms and exposure_age_s say when); false: only the active cluster, from "
        "Consul, fast."
    ),
]
AppName = Annotated[str, Path(pattern=_NAME, description="An application of the topology.")]


class _Api(FastAPI):
    """FastAPI with the security headers outside everything, the server's own error answers
    (500) included: Starlette puts its error handler outside every middleware added the usual
    way."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        #: a content security policy per path that needs its own
        self.security_policies: dict[str, str] = {}

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack(), self.security_policies)


def _add_health(app: FastAPI, service: ApiService, pools: ThreadPools) -> None:
    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process answers (in the event loop: no thread, nothing to wait behind)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: _ERRORS[503]})
    async def readyz() -> dict[str, Any]:
        """Consul answers and has a leader (asked on threads of its own)."""
        return await pools.run(Pool.READINESS, service.readiness)


def _add_reads(app: FastAPI, service: ApiService, pools: ThreadPools, read: list[Any]) -> None:
    @app.get("/v1/clusters", tags=["clusters"], dependencies=read, responses=_ERRORS)
    async def clusters() -> list[dict[str, Any]]:
        """Reachability from this API, Consul's checks, heartbeat freshness per vantage point."""
        return await pools.run(Pool.READS, service.clusters)

    @app.get("/v1/flows", tags=["flows"], dependencies=read, responses=_ERRORS)
    async def flows() -> dict[str, Any]:
        """Per flow and partition: replicated offset, end, lag; per flow: heartbeat freshness."""
        return await pools.run(Pool.READS, service.flows)

    @app.get("/v1/apps", tags=["apps"], dependencies=read, responses=_ERRORS)
    async def apps(exposure: Exposure = False) -> dict[str, Any]:
        """Every application's active cluster and epoch; the controller's leader."""
        return await pools.run(Pool.READS, partial(service.apps, exposure))

    @app.get("/v1/apps/{app}", tags=["apps"], dependencies=read, responses=_ERRORS)
    async def one_app(app: AppName, exposure: Exposure = False) -> dict[str, Any]:
        """Active cluster, epoch, and (with ``exposure``) per group what a failover now would
        lose or re-read."""
        return await pools.run(Pool.READS, partial(service.app, app, exposure))

    @app.get("/v1/apps/{app}/groups/{group}", tags=["apps"], dependencies=read, responses=_ERRORS)
    async def group(
        app: AppName,
        group: Annotated[str, Path(pattern=_NAME, description="A group of the application.")],
    ) -> dict[str, Any]:
        """The group's checkpoints per partition, and its exposure to a failover now."""
        return await pools.run(Pool.READS, partial(service.group, app, group))

    @app.get(
        "/v1/failovers",
        tags=["failovers"],
        dependencies=read,
        responses={**_ERRORS, 200: {"model": list[FailoverAnswer]}},
    )
    async def failovers() -> list[dict[str, Any]]:
        """Every failover of the namespace, oldest first."""
        return await pools.run(Pool.READS, service.failovers)

    @app.get(
        "/v1/failovers/{failover_id}",
        tags=["failovers"],
        dependencies=read,
        responses={**_ERRORS, 200: {"model": FailoverAnswer}},
    )
    async def one_failover(failover_id: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
        """One failover's record: steps, groups, what was not replicated."""
        return await pools.run(Pool.READS, partial(service.failover, failover_id))

    @app.get(
        "/metrics",
        tags=["metrics"],
        dependencies=read,
        response_class=Response,
        responses={401: _ERRORS[401], 403: _ERRORS[403]},
    )
    async def metrics() -> Response:
        """Prometheus metrics of this process."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def _add_moves(app: FastAPI, service: ApiService, pools: ThreadPools, operator: Any) -> None:
    """Failover and failback; ``operator``: the dependency that answers the caller, an
    operator."""
    Operator = Annotated[Caller, operator]

    async def move(app: str, body: MoveBody | None, failback: bool, caller: Caller) -> JSONResponse:
        given = body or MoveBody()
        request = MoveRequest(
            app,
            given.to,
            given.dry_run,
            given.force,
            given.request_id,
            failback,
            expect_kind=None if given.expect_kind is None else FailoverKind(given.expect_kind),
            expect_epoch=given.expect_epoch,
            caller=caller,
        )
        status, doc = await pools.run(Pool.CHANGES, partial(service.move, request))
        headers = {} if status == 200 else {"Location": f"/v1/failovers/{doc['id']}"}
        return JSONResponse(doc, status_code=status, headers=headers)

    @app.post(
        "/v1/apps/{app}/failover",
        tags=["failovers"],
        status_code=202,
        responses=_MOVE_ERRORS,
    )
    async def failover(app: AppName, body: MoveBody, caller: Operator) -> JSONResponse:
        """Move the application to ``to``: 202 with the failover record (it runs on; follow
        the Location), or 200 with the plan for a dry run (its ``kind`` and the application's
        ``epoch``: send them back as ``expect_kind`` and ``expect_epoch`` to run that plan and
        no other, 412 if the situation changed)."""
        return await move(app, body, False, caller)

    @app.post(
        "/v1/apps/{app}/failback",
        tags=["failovers"],
        status_code=202,
        responses=_MOVE_ERRORS,
    )
    async def failback(
        app: AppName, caller: Operator, body: MoveBody | None = None
    ) -> JSONResponse:
        """Move the application back to its preferred cluster (or ``to``)."""
        return await move(app, body, True, caller)


def _add_events(app: FastAPI, feed: EventFeed, read: list[Any]) -> None:
    @app.get("/v1/events", tags=["events"], dependencies=read, responses=_ERRORS)
    async def events(
        response: Response,
        after: Annotated[
            str,
            Query(
                max_length=160,
                pattern=EVENT_CURSOR.pattern,
                description="The last event id seen (0: from the first event kept). Ids come "
                "from the failover records, so one from before a restart of the API, or from "
                "another replica, still works.",
            ),
        ] = START,
        wait_s: Annotated[
            float, Query(ge=0, le=30, description="Long-poll: wait this long for a new event.")
        ] = 0,
    ) -> dict[str, Any]:
        """Failover steps as they are recorded, after event ``after`` (long-poll). When too
        many polls wait already, the answer comes at once, with ``Retry-After``."""
        answer = await feed.read(after, wait_s)
        if answer.retry_after_s is not None:
            response.headers["Retry-After"] = str(answer.retry_after_s)
        found = answer.events
        return {
            "events": [e.as_dict() for e in found],
            "last_id": found[-1].id if found else after,
        }


def create_app(
    service: ApiService,
    auth: ApiAuth,
    limits: ApiLimits | None = None,
    *,
    allowed_hosts: Sequence[str] | None = None,
) -> FastAPI:
    """The API over ``service``; ``allowed_hosts``: answer only requests whose ``Host`` is one
    of these (against DNS rebinding; none: any)."""
    limits = limits or ApiLimits()
    app = _Api(
        title="drsvc",
        summary="Disaster recovery and failover for Apache Kafka",
        version="1",
        docs_url=None,
        redoc_url=None,
    )
    install_problem_handlers(app)
    bearer = HTTPBearer(
        auto_error=False,
        description="An API token (DRSVC_API_TOKEN, --token-file or --tokens-file).",
    )
    pools = ThreadPools(limits)
    # Added innermost first: the request guard sees a request before any other middleware
    # that looks past its host, and the counter sees every answer, refusals included.
    app.add_middleware(RequestGuard, auth=auth, max_body_bytes=limits.max_body_bytes)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(RequestMetrics)

    # The guard has checked the token already; these check it again (a route that the guard's
    # path rule missed stays closed) and hand the handlers who is calling.
    async def reader(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller | None:
        return auth.check(None if credentials is None else credentials.credentials, mutating=False)

    async def writer(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller:
        caller = auth.check(None if credentials is None else credentials.credentials, mutating=True)
        if caller is None:  # check() answers a caller or raises for every change
            raise ApiProblem(403, "forbidden", "a change needs an operator token")
        return caller

    read = [Depends(reader)]
    app.security_policies = add_pages(app)
    _add_health(app, service, pools)
    _add_reads(app, service, pools, read)
    _add_moves(app, service, pools, Depends(writer))
    _add_migrations(app, service, pools, read, Depends(writer))
    feed = EventFeed(
        service.events,
        service.refresh_events,
        pools,
        max_waiters=limits.max_long_polls,
        refresh_s=limits.long_poll_refresh_s,
    )
    _add_events(app, feed, read)
    return app
