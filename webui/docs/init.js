// Swagger UI over the gateway's own OpenAPI document. No validator: Swagger UI's default
// sends the document to validator.swagger.io for a badge, and this page talks to no one but
// the gateway that served it.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
