// The documents view: status and failure reasons, page by page; retry failed, delete.

import { deleteDocument, listDocuments, retryFailed } from "./api";
import { coalesce } from "./coalesce";
import { byId, el, replaceChildren, showError } from "./dom";
import type { Document } from "./types";

const PAGE_SIZE = 50;

export class DocumentsView {
  /** The tokens of the pages before the current one, and the current one's. */
  private previous: string[] = [];
  private current = "";
  private next = "";
  /** The document whose Delete was clicked once (the next click deletes it). */
  private armed: string | null = null;
  loaded = false;

  constructor() {
    byId("documents-refresh").addEventListener("click", () => void this.refresh());
    byId("documents-status").addEventListener("change", () => {
      this.previous = [];
      this.current = "";
      void this.refresh();
    });
    byId("documents-next").addEventListener("click", () => {
      if (this.next === "") return;
      this.previous.push(this.current);
      this.current = this.next;
      void this.refresh();
    });
    byId("documents-prev").addEventListener("click", () => {
      if (this.previous.length === 0) return;
      this.current = this.previous.pop() ?? "";
      void this.refresh();
    });
    byId("retry-failed").addEventListener("click", () => void this.retry());
  }

  readonly refresh = coalesce(async () => {
    try {
      const page = await listDocuments(byId<HTMLSelectElement>("documents-status").value, PAGE_SIZE, this.current);
      this.loaded = true;
      this.next = page.next_page_token;
      byId<HTMLButtonElement>("documents-next").disabled = this.next === "";
      byId<HTMLButtonElement>("documents-prev").disabled = this.previous.length === 0;
      byId("documents-total").textContent = `${page.total} document(s) · index v${page.index_version}`;
      replaceChildren(byId("documents-body"), ...page.documents.map((document) => this.row(document)));
      showError(null);
    } catch (error) {
      showError(String(error));
    }
  });

  private row(document: Document): HTMLTableRowElement {
    const status = document.status.replace(/^DOCUMENT_STATUS_/, "").toLowerCase();
    const armed = this.armed === document.doc_id;
    const remove = el("button", { type: "button", "data-testid": "document-delete" }, armed ? "Confirm delete" : "Delete");
    // Two clicks: the first arms the button, so a stray click deletes nothing. The armed
    // document is the view's state, so a live refresh between the clicks keeps it armed.
    remove.addEventListener("click", () => {
      if (this.armed !== document.doc_id) {
        this.armed = document.doc_id;
        remove.textContent = "Confirm delete";
        return;
      }
      this.armed = null;
      remove.disabled = true;
      void this.remove(document.doc_id);
    });
    return el("tr", { "data-testid": "document-row", "data-doc-id": document.doc_id, "data-status": status },
      el("td", {}, el("div", {}, document.file_path || document.doc_id),
        document.file_path && document.file_path !== document.doc_id ? el("div", { class: "muted" }, document.doc_id) : null),
      el("td", {}, el("span", { class: `status status-${status}`, "data-testid": "document-status" }, status),
        document.chunks_changed ? el("div", { class: "muted", "data-testid": "document-progress" },
          `${document.chunks_settled} of ${document.chunks_changed} chunks`) : null),
      el("td", {}, String(document.length)),
      el("td", {}, document.updated_at_ms ? new Date(document.updated_at_ms).toLocaleString() : ""),
      el("td", {},
        document.reason ? el("div", { class: "error", "data-testid": "document-reason" }, document.reason) : null,
        el("div", { class: "preview", "data-testid": "document-preview" }, document.preview)),
      el("td", {}, remove));
  }

  private async remove(docId: string): Promise<void> {
    try {
      await deleteDocument(docId);
      byId("documents-message").textContent = `Deleting ${docId}…`;
      await this.refresh();
    } catch (error) {
      showError(String(error));
    }
  }

  private async retry(): Promise<void> {
    try {
      const result = await retryFailed();
      const refused = result.not_retried.map((item) => `${item.doc_id} (${item.reason})`).join("; ");
      byId("documents-message").textContent =
        `Retrying ${result.retried.length} document(s).` + (refused ? ` Not retried: ${refused}` : "");
      await this.refresh();
    } catch (error) {
      showError(String(error));
    }
  }
}
