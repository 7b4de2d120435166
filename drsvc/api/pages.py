"""The pages a browser loads: the operator dashboard and the interactive API documents.

None of them holds data (the dashboard's script calls the API with the token the operator types
in), so they need no token. Every page runs under the API's content security policy: scripts and
styles are files served by this process, never inline and never from another host. The API
documents are Swagger UI, whose script and styles come from a Python dependency
(``fastapi-swagger``'s bundled assets, served under ``/swagger-ui``), started by a script of
this package.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from drsvc.api.guard import CONTENT_SECURITY_POLICY

__all__ = ["DOCS_PATH", "DOCS_POLICY", "SWAGGER_UI_PATH", "add_pages"]

DOCS_PATH = "/docs"
#: where Swagger UI's script and styles are served from (this process)
SWAGGER_UI_PATH = "/swagger-ui"
#: the package whose directory holds Swagger UI's bundle, styles and icon
_SWAGGER_UI_ASSETS = ("fastapi_swagger", "resources")
#: the API's policy, with images from data: URLs too: Swagger UI's styles draw their icons so.
#: Scripts and styles stay this origin's only.
DOCS_POLICY = f"{CONTENT_SECURITY_POLICY}; img-src 'self' data:"


@cache
def _page(name: str) -> str:
    return files("drsvc.api").joinpath(f"static/{name}").read_text(encoding="utf-8")


def add_pages(app: FastAPI) -> dict[str, str]:
    """Add ``/``, ``/dashboard``, ``/static/...``, ``/docs`` and ``/swagger-ui/...``; answer the
    content security policy of each path that needs its own."""
    app.mount("/static", StaticFiles(packages=[("drsvc.api", "static")]), name="static")
    app.mount(SWAGGER_UI_PATH, StaticFiles(packages=[_SWAGGER_UI_ASSETS]), name="swagger-ui")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        return HTMLResponse(_page("dashboard.html"))

    @app.get(DOCS_PATH, include_in_schema=False)
    async def api_documents() -> HTMLResponse:
        return HTMLResponse(_page("docs.html"))

    return {DOCS_PATH: DOCS_POLICY}
