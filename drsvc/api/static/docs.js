// Starts Swagger UI on the API documents page: a file of its own, not inline, so the page runs
// under the API's content security policy (scripts from this origin only). The OpenAPI
// document's address is an attribute of the page.
"use strict";
window.addEventListener("load", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    // the token typed into "Authorize" stays in the page, never in the browser's storage
    persistAuthorization: false,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    layout: "BaseLayout",
  });
});
