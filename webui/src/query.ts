// The query playground: the answer streams in from POST /api/v1/query/stream; the references
// arrive first (with the retrieved context) and each opens its chunk text.

import { streamQuery } from "./api";
import { byId, el, replaceChildren } from "./dom";
import { openChunk, shortId } from "./graph";
import type { Reference } from "./types";

export class QueryView {
  private running: AbortController | null = null;
  /** The index version the shown answer was made at. */
  private answeredAt: number | null = null;

  constructor() {
    byId<HTMLFormElement>("query-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.run();
    });
  }

  async run(): Promise<void> {
    const question = byId<HTMLTextAreaElement>("query-question").value.trim();
    const status = byId("query-status");
    const answer = byId("query-answer");
    if (question === "") {
      status.textContent = "Type a question first.";
      return;
    }
    this.running?.abort();
    const controller = new AbortController();
    this.running = controller;
    answer.textContent = "";
    this.answeredAt = null;
    byId("query-stale").hidden = true;
    replaceChildren(byId("query-references"));
    byId("query-chunk").hidden = true;
    status.textContent = "Retrieving…";
    status.dataset.state = "running";
    try {
      await streamQuery(
        {
          question,
          mode: byId<HTMLSelectElement>("query-mode").value,
          top_k: positive(byId<HTMLInputElement>("query-top-k").value, 40),
          chunk_top_k: positive(byId<HTMLInputElement>("query-chunk-top-k").value, 20),
          include_references: true,
        },
        {
          context: (result) => {
            status.textContent = `Answering… (${result.entities.length} entities, ${result.relations.length} relations, ${result.chunks.length} chunks)`;
            this.renderReferences(result.references);
          },
          delta: (text) => answer.append(document.createTextNode(text)),
          done: (summary) => {
            const usage = Object.entries(summary.usage ?? {})
              .filter(([, value]) => value)
              .map(([name, value]) => `${name} ${value}`)
              .join(", ");
            status.textContent = `Done at index v${summary.index_version}${summary.llm_configured ? "" : " · extractive (no LLM configured)"}${usage ? ` · ${usage}` : ""}`;
            status.dataset.state = "done";
            this.answeredAt = summary.index_version;
          },
        },
        controller.signal,
      );
    } catch (error) {
      if (controller.signal.aborted) return;
      status.textContent = String(error);
      status.dataset.state = "error";
    }
  }

  /** The answer is not refreshed by itself (it may have cost an LLM call): say it is older. */
  noteVersion(version: number): void {
    if (this.answeredAt === null || version <= this.answeredAt) return;
    const stale = byId("query-stale");
    stale.textContent = `The index has moved to v${version} since this answer (v${this.answeredAt}): ask again for a fresh one.`;
    stale.hidden = false;
  }

  private renderReferences(references: Reference[]): void {
    const panel = byId("query-chunk");
    replaceChildren(
      byId("query-references"),
      ...references.map((reference) => {
        const chunks = reference.chunk_ids.map((chunkId) => {
          const button = el("button", { type: "button", class: "link", "data-testid": "reference-chunk", title: chunkId }, shortId(chunkId));
          button.addEventListener("click", () => void openChunk(chunkId, panel));
          return button;
        });
        return el("li", { "data-testid": "query-reference" },
          el("strong", {}, `[${reference.reference_id}] `), reference.file_path, " ", ...chunks);
      }),
    );
  }
}

function positive(text: string, fallback: number): number {
  const value = Number.parseInt(text, 10);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}
