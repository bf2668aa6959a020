// The API docs page in a real browser (Debian's Chromium, headless, driven by playwright-core):
// /docs renders Swagger UI over the gateway's /openapi.json and lists its routes, and every
// request the page makes goes to the gateway that served it (no CDN, no validator).
// tests/webui/test_api_docs.py starts the gateway and runs this.
//
// Environment: KGSTREAM_DOCS_URL (the page's address), KGSTREAM_ARTIFACTS (where the
// screenshot goes), KGSTREAM_CHROMIUM (default /usr/bin/chromium).
// Prints one JSON line with what it saw; exits non-zero on the first failed step.

import { join } from "node:path";
import { chromium } from "playwright-core";

const url = process.env.KGSTREAM_DOCS_URL;
const artifacts = process.env.KGSTREAM_ARTIFACTS;
const executablePath = process.env.KGSTREAM_CHROMIUM || "/usr/bin/chromium";
if (!url || !artifacts) throw new Error("KGSTREAM_DOCS_URL and KGSTREAM_ARTIFACTS must be set");

const origin = new URL(url).origin;
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
});
const seen = { requests: [], elsewhere: [], errors: [] };
let page;
try {
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(30_000);
  // Every request the page makes, answered or not (a blocked one still counts).
  page.on("request", (request) => {
    seen.requests.push(request.url());
    if (!request.url().startsWith(`${origin}/`) && !request.url().startsWith("data:")) {
      seen.elsewhere.push(request.url());
    }
  });
  page.on("pageerror", (error) => seen.errors.push(String(error)));
  page.on("console", (message) => {
    if (message.type() === "error") seen.errors.push(`console: ${message.text()}`);
  });
  await page.goto(url, { waitUntil: "networkidle" });
  await page.locator(".opblock").first().waitFor();
  seen.title = await page.locator(".info .title").first().textContent();
  seen.routes = await page.locator(".opblock-summary").evaluateAll((blocks) =>
    blocks.map((block) => {
      const method = block.querySelector(".opblock-summary-method")?.textContent ?? "";
      const path = block.querySelector(".opblock-summary-path")?.getAttribute("data-path") ?? "";
      return `${method.trim()} ${path.trim()}`;
    }),
  );
  // Open one operation: its parameters show the schema's constraints.
  await page.locator(".opblock-summary", { hasText: "/api/v1/subgraph" }).first().click();
  await page.locator(".parameters").first().waitFor();
  seen.subgraphParameters = await page.locator(".parameters").first().textContent();
  await page.screenshot({ path: join(artifacts, "api-docs.png") });
  await page.waitForLoadState("networkidle");
  seen.ok = seen.elsewhere.length === 0 && seen.errors.length === 0;
  console.log(JSON.stringify(seen));
  if (!seen.ok) process.exitCode = 1;
} catch (error) {
  if (page) await page.screenshot({ path: join(artifacts, "failure.png") }).catch(() => {});
  console.log(JSON.stringify(seen));
  console.error(error);
  process.exitCode = 1;
} finally {
  await browser.close();
}
