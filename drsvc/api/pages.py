"""The pages a browser loads: the operator dashboard and the interactive API documents.

None of them holds data (the dashboard's script calls the API with the token the operator types
in), so they need no token. Every page runs under the API's content security policy: the
dashboard's script and styles are files of this package, served from ``/static``, never inline.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from drsvc.api.guard import CONTENT_SECURITY_POLICY

__all__ = ["DOCS_PATH", "SWAGGER_UI_HOST", "add_pages"]

DOCS_PATH = "/docs"
#: where FastAPI's interactive documents load Swagger UI from (serving it from this process
#: is a change of its own)
SWAGGER_UI_HOST = "https://cdn.jsdelivr.net"
_SWAGGER_FAVICON_HOST = "https://fastapi.tiangolo.com"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


@cache
def _dashboard_page() -> str:
    return files("drsvc.api").joinpath("static/dashboard.html").read_text(encoding="utf-8")


def _docs_policy(page: str) -> str:
    """The API's policy, widened for the documents page only: Swagger UI's script and styles
    from its one host, and the page's one inline script by its hash (nothing else inline)."""
    hashes = " ".join(
        "'sha256-"
        + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
        + "'"
        for script in _INLINE_SCRIPT.findall(page)
    )
    return (
        f"{CONTENT_SECURITY_POLICY}; script-src 'self' {SWAGGER_UI_HOST} {hashes}; "
        f"style-src 'self' {SWAGGER_UI_HOST}; img-src 'self' data: {_SWAGGER_FAVICON_HOST}"
    )


def add_pages(app: FastAPI) -> dict[str, str]:
    """Add ``/``, ``/dashboard``, ``/static/...`` and ``/docs``; answer the content security
    policy of each path that needs its own."""
    app.mount("/static", StaticFiles(packages=[("drsvc.api", "static")]), name="static")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        return HTMLResponse(_dashboard_page())

    docs = get_swagger_ui_html(openapi_url=app.openapi_url or "", title=f"{app.title} - API")
    page = bytes(docs.body).decode("utf-8")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def api_documents() -> HTMLResponse:
        return HTMLResponse(page)

    return {DOCS_PATH: _docs_policy(page)}
