// The web UI in a real browser (Debian's Chromium, headless, driven by playwright-core):
// search an entity, expand it, ask a mix query and open a reference, then edit a watched
// file and see the new entity appear without a reload; a document containing <script>
// shows as text. tests/webui/test_browser.py starts `kgstream run` and runs this.
//
// Environment: KGSTREAM_UI_URL (the UI's address, with ?token= when auth is on), KGSTREAM_WATCH_DIR (the watched folder),
// KGSTREAM_ARTIFACTS (where the screenshots go), KGSTREAM_CHROMIUM (default /usr/bin/chromium).
// Prints one JSON line with what it saw; exits non-zero on the first failed step.

import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const url = required("KGSTREAM_UI_URL");
const watched = required("KGSTREAM_WATCH_DIR");
const artifacts = required("KGSTREAM_ARTIFACTS");
const executablePath = process.env.KGSTREAM_CHROMIUM || "/usr/bin/chromium";
const STEP_MS = 30_000;
const INDEX_MS = 90_000;

// The sample corpus's Imogen Hale, and a sentence that gives her a new neighbour.
const SEED = "Imogen Hale";
const NEIGHBOUR = "Tidewater Battery Lab";
const NEW_ENTITY = "Quillon Tide Institute";
const EDITED_FILE = join(watched, "people", "imogen-hale.md");
const EDIT = `\nIn 2026 Imogen Hale founded the ${NEW_ENTITY} in Port Aldren.\n`;

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}

mkdirSync(artifacts, { recursive: true });
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
});
const seen = { steps: [] };
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await context.newPage();
  const dialogs = [];
  const pageErrors = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  page.on("console", (message) => {
    // A 404 is an answer the UI handles (a seed whose entity went); script and policy errors are not.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      pageErrors.push(`console: ${message.text()}`);
    }
  });
  page.setDefaultTimeout(STEP_MS);
  let step = 0;
  const shot = async (name) => {
    step += 1;
    const file = join(artifacts, `${String(step).padStart(2, "0")}-${name}.png`);
    await page.screenshot({ path: file });
    seen.steps.push(name);
  };
  const byTestId = (id) => page.getByTestId(id);
  const nodeItem = (name) => byTestId("node-list").getByTestId("node-item").filter({ hasText: name });

  // 1. The UI loads and the live indicator shows the index version.
  await page.goto(url);
  await page.waitForFunction(() => /^v\d+/.test(document.querySelector('[data-testid="live-indicator"]')?.textContent ?? ""));
  seen.indicator = await byTestId("live-indicator").textContent();
  if (new URL(page.url()).searchParams.has("token")) throw new Error("the token stayed in the address");
  await shot("loaded");

  // 2. Search an entity: it and its neighbourhood are shown, with its properties.
  await byTestId("entity-search").fill(SEED);
  await byTestId("search-button").click();
  await nodeItem(SEED).first().waitFor();
  await nodeItem(NEIGHBOUR).first().waitFor();
  await byTestId("details-name").filter({ hasText: SEED }).waitFor();
  const before = await byTestId("node-item").count();
  seen.shownAfterSearch = before;
  await shot("search");

  // 3. Expand a neighbour: its neighbourhood merges in; its chunk opens.
  await nodeItem(NEIGHBOUR).first().click();
  await byTestId("details-name").filter({ hasText: NEIGHBOUR }).waitFor();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="node-item"]').length > n, before);
  seen.shownAfterExpand = await byTestId("node-item").count();
  await byTestId("details-chunks").getByTestId("chunk-link").first().click();
  await byTestId("graph-chunk").getByTestId("chunk-text").waitFor();
  await byTestId("graph-chunk").scrollIntoViewIfNeeded();
  await shot("expand");

  // An edge clicked on the canvas shows the relation; the type filter narrows the graph.
  const box = await byTestId("graph-canvas").boundingBox();
  const middle = await page.evaluate(() => {
    // The middle of an edge that no node covers, so the click lands on the edge.
    const cy = window.kgstreamGraph;
    const clear = (point) =>
      cy.nodes().every((node) => {
        const b = node.renderedBoundingBox({ includeLabels: false });
        return point.x < b.x1 - 4 || point.x > b.x2 + 4 || point.y < b.y1 - 4 || point.y > b.y2 + 4;
      });
    const edge = cy.edges().filter((e) => !e.source().same(e.target()) && clear(e.renderedMidpoint()))[0];
    return edge.renderedMidpoint();
  });
  await page.mouse.click(box.x + middle.x, box.y + middle.y);
  await byTestId("details-name").filter({ hasText: "—" }).waitFor();
  await byTestId("filter-type").selectOption("person");
  await page.waitForFunction(() =>
    [...document.querySelectorAll('[data-testid="node-item"]')].every((item) => item.textContent.includes("person")),
  );
  seen.people = await byTestId("node-item").count();
  await byTestId("filter-type").selectOption("");
  await byTestId("filter-doc").selectOption("people/imogen-hale.md");
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="node-item"]').length < n, seen.shownAfterExpand);
  await nodeItem(SEED).first().waitFor();
  await byTestId("filter-doc").selectOption("");
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="node-item"]').length === n, seen.shownAfterExpand);

  // From here on the page must not load again: live updates arrive in place.
  await page.evaluate(() => {
    window.__kgstreamSamePage = true;
  });
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });

  // 4. A mix query streams its answer and lists references; one opens its chunk.
  await byTestId("tab-query").click();
  await byTestId("query-question").fill(`Who is the director of ${NEIGHBOUR}?`);
  await byTestId("query-mode").selectOption("mix");
  await byTestId("query-run").click();
  await page.locator('[data-testid="query-status"][data-state="done"]').waitFor();
  const references = await byTestId("query-reference").count();
  if (references === 0) throw new Error("the mix query listed no references");
  seen.references = references;
  seen.answer = (await byTestId("query-answer").textContent()).slice(0, 200);
  await byTestId("reference-chunk").first().click();
  await byTestId("query-chunk").getByTestId("chunk-text").waitFor();
  await shot("query");

  // 5. Edit a watched file: the new entity appears in the shown graph without a reload.
  await byTestId("tab-graph").click();
  const versionBefore = Number(await byTestId("live-indicator").getAttribute("data-version"));
  const original = readFileSync(EDITED_FILE, "utf8");
  appendFileSync(EDITED_FILE, EDIT);
  await nodeItem(NEW_ENTITY).first().waitFor({ timeout: INDEX_MS });
  await nodeItem(NEW_ENTITY).first().getByTestId("node-new").waitFor();
  const onCanvas = await page.evaluate(
    (name) => window.kgstreamGraph.nodes().some((node) => node.data("name") === name && node.visible()),
    NEW_ENTITY,
  );
  if (!onCanvas) throw new Error(`${NEW_ENTITY} is listed but not drawn`);
  await nodeItem(NEW_ENTITY).first().click();
  await byTestId("details-name").filter({ hasText: NEW_ENTITY }).waitFor();
  await byTestId("node-list").evaluate((list) => list.closest("aside")?.scrollTo(0, 0));
  const versionAfter = Number(await byTestId("live-indicator").getAttribute("data-version"));
  if (!(versionAfter > versionBefore)) throw new Error(`the indicator stayed at v${versionBefore}`);
  seen.versions = [versionBefore, versionAfter];
  // The answer on the query tab is not remade by itself, but says that it is older.
  await page.waitForFunction(() => !document.querySelector('[data-testid="query-stale"]').hidden);
  await shot("live-update");

  // 6. Undo the edit: the entity (expanded just now, so also a seed) leaves the graph.
  writeFileSync(EDITED_FILE, original);
  await nodeItem(NEW_ENTITY).first().waitFor({ state: "detached", timeout: INDEX_MS });
  await nodeItem(SEED).first().waitFor();
  await shot("live-removal");

  // 7. A document containing <script> shows as text: no dialog, no script element.
  await byTestId("tab-documents").click();
  const row = byTestId("document-row").filter({ hasText: "<script>alert(1)</script>" });
  await row.first().waitFor();
  await row.first().getByTestId("document-preview").filter({ hasText: "<script>alert(1)</script>" }).waitFor();
  await row.first().scrollIntoViewIfNeeded();
  const injected = await page.evaluate(() => document.querySelectorAll("main script, main img").length);
  if (injected !== 0) throw new Error(`document text became ${injected} element(s)`);
  await shot("documents");

  // 8. Retry failed answers (nothing failed here); delete removes the document, and the
  // list drops it when the index moves.
  await byTestId("retry-failed").click();
  await byTestId("documents-message").filter({ hasText: "Retrying 0 document(s)" }).waitFor();
  const remove = row.first().getByTestId("document-delete");
  await remove.click();
  await remove.filter({ hasText: "Confirm delete" }).waitFor();
  await remove.click();
  await row.first().waitFor({ state: "detached", timeout: INDEX_MS });

  if (dialogs.length > 0) throw new Error(`the page opened dialogs: ${JSON.stringify(dialogs)}`);
  const samePage = await page.evaluate(() => window.__kgstreamSamePage === true);
  if (!samePage || navigations !== 0) throw new Error(`the page reloaded (${navigations} navigation(s))`);
  if (pageErrors.length > 0) throw new Error(`uncaught errors in the page: ${pageErrors.join("; ")}`);
  seen.ok = true;
  console.log(JSON.stringify(seen));
} catch (error) {
  if (page) await page.screenshot({ path: join(artifacts, "failure.png") }).catch(() => {});
  console.log(JSON.stringify(seen));
  console.error(error);
  process.exitCode = 1;
} finally {
  await browser.close();
}
