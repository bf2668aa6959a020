// The graph view: search an entity, show its neighbourhood, expand nodes, inspect nodes and
// edges, filter by type and document. What is shown is the union of the subgraphs of the
// "seeds" (the entity searched and every node expanded), so a refresh re-asks for exactly them.

import cytoscape from "cytoscape";
import { ApiError, fetchChunk, fetchSubgraph, searchEntities } from "./api";
import { coalesce } from "./coalesce";
import { byId, el, replaceChildren, showError } from "./dom";
import type { Entity, Relation } from "./types";

const nodeId = (key: string): string => `n:${key}`;
const edgeId = (relation: Relation): string => {
  const [a, b] = [relation.source, relation.target].sort();
  return `e:${a}\u0000${b}`;
};

type Selection = { kind: "entity"; key: string } | { kind: "relation"; id: string } | null;

export class GraphView {
  private readonly cy: cytoscape.Core;
  private seeds: string[] = [];
  private entities = new Map<string, Entity>();
  private relations = new Map<string, Relation>();
  private selection: Selection = null;
  /** The entities a live refresh brought in, marked until the next one. */
  private fresh = new Set<string>();
  /** Counts what the user did to the graph (show, expand, clear), so a refresh that raced one asks again. */
  private generation = 0;
  /** Asks again for every seed's subgraph (the index moved): adds, updates and drops elements. */
  readonly refresh = coalesce(async () => {
    let loaded: Awaited<ReturnType<GraphView["fetch"]>>;
    let started: number;
    do {
      started = this.generation;
      if (this.seeds.length === 0) return;
      loaded = await this.fetch(this.seeds, true);
      if (loaded === null) return;
    } while (started !== this.generation);
    const before = new Set(this.entities.keys());
    this.seeds = loaded.seeds;
    this.entities = loaded.entities;
    this.relations = loaded.relations;
    this.fresh = new Set([...this.entities.keys()].filter((key) => !before.has(key)));
    this.sync(loaded.truncated);
  });

  constructor() {
    this.cy = cytoscape({
      container: byId("cy"),
      wheelSensitivity: 0.3,
      style: [
        {
          selector: "node",
          style: {
            label: "data(name)",
            "background-color": "data(color)",
            "font-size": 11,
            color: "#1d2430",
            "text-valign": "bottom",
            "text-margin-y": 4,
            width: 22,
            height: 22,
          },
        },
        { selector: "node.seed", style: { "border-width": 3, "border-color": "#1d2430" } },
        { selector: "node.fresh", style: { "border-width": 4, "border-color": "#e07b00" } },
        { selector: "edge", style: { width: "data(width)", "line-color": "#9aa5b5", "curve-style": "bezier" } },
        { selector: ":selected", style: { "overlay-opacity": 0.2, "overlay-color": "#e07b00" } },
        { selector: ".filtered", style: { display: "none" } },
      ],
    });
    this.cy.on("tap", "node", (event) => {
      const key = (event.target as cytoscape.NodeSingular).data("key") as string;
      void this.expand(key);
    });
    this.cy.on("tap", "edge", (event) => {
      this.select({ kind: "relation", id: (event.target as cytoscape.EdgeSingular).id() });
    });
    // Tests and the curious can reach the graph from the console.
    (window as unknown as { kgstreamGraph: cytoscape.Core }).kgstreamGraph = this.cy;

    byId<HTMLFormElement>("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.search(byId<HTMLInputElement>("search-input").value.trim());
    });
    byId("graph-clear").addEventListener("click", () => {
      this.generation += 1;
      this.seeds = [];
      this.entities.clear();
      this.relations.clear();
      this.selection = null;
      replaceChildren(byId("search-results"));
      this.sync(false);
    });
    byId("filter-type").addEventListener("change", () => this.applyFilters());
    byId("filter-doc").addEventListener("change", () => this.applyFilters());
  }

  /** Lays the canvas out again after its view was hidden (a hidden container has no size). */
  resize(): void {
    this.cy.resize();
    this.cy.fit(undefined, 30);
  }

  async search(text: string): Promise<void> {
    const results = byId("search-results");
    if (text === "") {
      replaceChildren(results);
      return;
    }
    try {
      const { entities } = await searchEntities(text);
      showError(null);
      if (entities.length === 0) {
        replaceChildren(results, el("li", { class: "muted", "data-testid": "search-empty" }, `No entity matches “${text}”.`));
        return;
      }
      replaceChildren(
        results,
        ...entities.map(({ entity, degree }) => {
          const button = el("button", { type: "button", "data-testid": "search-result", "data-key": entity.key },
            entity.name, el("span", { class: "muted" }, ` ${entity.type} · ${degree} links`));
          button.addEventListener("click", () => {
            replaceChildren(results);
            void this.show(entity.name);
          });
          return el("li", {}, button);
        }),
      );
      // An exact match (or the only one) is shown at once; the others stay to choose from.
      if (entities.length === 1 || entities[0].entity.name.toLowerCase() === text.toLowerCase()) {
        replaceChildren(results);
        await this.show(entities[0].entity.name);
      }
    } catch (error) {
      showError(String(error));
    }
  }

  /** Replaces the graph with one entity and its neighbourhood. */
  async show(name: string): Promise<void> {
    this.generation += 1;
    const loaded = await this.fetch([name]);
    if (loaded === null) return;
    this.generation += 1;
    this.seeds = [name];
    this.entities = loaded.entities;
    this.relations = loaded.relations;
    this.fresh.clear();
    const shown = [...this.entities.values()].find((entity) => entity.name === name);
    this.selection = shown ? { kind: "entity", key: shown.key } : null;
    byId("graph-chunk").hidden = true;
    this.sync(loaded.truncated);
  }

  /** Merges an entity's neighbourhood into the graph and shows its properties. */
  async expand(key: string): Promise<void> {
    const entity = this.entities.get(key);
    if (!entity) return;
    this.select({ kind: "entity", key });
    this.generation += 1;
    if (!this.seeds.includes(entity.name)) this.seeds.push(entity.name);
    const loaded = await this.fetch([entity.name]);
    if (loaded === null) return;
    this.generation += 1;
    for (const [k, value] of loaded.entities) this.entities.set(k, value);
    for (const [id, value] of loaded.relations) this.relations.set(id, value);
    this.sync(loaded.truncated);
  }

  /**
   * The union of the seeds' subgraphs, or null (and the error shown) when a call failed. With
   * `dropMissing`, a seed the index no longer has (404: its documents were deleted) is left out
   * instead, so the refreshed graph loses it.
   */
  private async fetch(seeds: string[], dropMissing = false): Promise<{
    seeds: string[];
    entities: Map<string, Entity>;
    relations: Map<string, Relation>;
    truncated: boolean;
  } | null> {
    const outcomes = await Promise.allSettled(seeds.map((seed) => fetchSubgraph(seed, 1)));
    const kept: string[] = [];
    const entities = new Map<string, Entity>();
    const relations = new Map<string, Relation>();
    let truncated = false;
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome.status === "rejected") {
        if (dropMissing && outcome.reason instanceof ApiError && outcome.reason.status === 404) continue;
        showError(String(outcome.reason));
        return null;
      }
      kept.push(seeds[index]);
      for (const entity of outcome.value.entities) entities.set(entity.key, entity);
      for (const relation of outcome.value.relations) relations.set(edgeId(relation), relation);
      truncated ||= outcome.value.truncated;
    }
    showError(null);
    return { seeds: kept, entities, relations, truncated };
  }

  /** Makes the canvas, the node list, the filters and the details match the maps. */
  private sync(truncated: boolean): void {
    byId("graph-count").textContent = `(${this.entities.size}${truncated ? ", truncated" : ""})`;
    const wanted = new Set<string>();
    const seedNames = new Set(this.seeds);
    let added = false;
    this.cy.batch(() => {
      for (const entity of this.entities.values()) {
        const id = nodeId(entity.key);
        wanted.add(id);
        const data = { id, key: entity.key, name: entity.name, type: entity.type, color: colorOf(entity.type) };
        const node = this.cy.getElementById(id);
        if (node.empty()) {
          this.cy.add({ group: "nodes", data });
          added = true;
        } else node.data(data);
        this.cy.getElementById(id).toggleClass("seed", seedNames.has(entity.name));
        this.cy.getElementById(id).toggleClass("fresh", this.fresh.has(entity.key));
      }
      for (const [id, relation] of this.relations) {
        if (!this.entities.has(relation.source) || !this.entities.has(relation.target)) continue;
        wanted.add(id);
        const data = {
          id,
          source: nodeId(relation.source),
          target: nodeId(relation.target),
          width: Math.min(6, 1 + Math.log1p(relation.weight)),
        };
        const edge = this.cy.getElementById(id);
        if (edge.empty()) {
          this.cy.add({ group: "edges", data });
          added = true;
        } else edge.data("width", data.width);
      }
      this.cy.elements().filter((element) => !wanted.has(element.id())).remove();
    });
    if (added) {
      this.cy.layout({ name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true } as cytoscape.LayoutOptions).run();
      this.cy.fit(undefined, 30);
    }
    this.renderFilters();
    this.applyFilters();
    this.select(this.selection);
  }

  private renderFilters(): void {
    // By doc id: an entity's file_paths and doc_ids are two sorted sets, not pairs.
    const types = new Set<string>();
    const documents = new Set<string>();
    for (const entity of this.entities.values()) {
      types.add(entity.type);
      for (const docId of entity.doc_ids) documents.add(docId);
    }
    fillSelect(byId<HTMLSelectElement>("filter-type"), [...types].sort().map((t) => [t, t]));
    fillSelect(byId<HTMLSelectElement>("filter-doc"), [...documents].sort().map((d) => [d, d]));
  }

  private visible(entity: Entity): boolean {
    const type = byId<HTMLSelectElement>("filter-type").value;
    const docId = byId<HTMLSelectElement>("filter-doc").value;
    return (type === "" || entity.type === type) && (docId === "" || entity.doc_ids.includes(docId));
  }

  private applyFilters(): void {
    const shown = [...this.entities.values()].filter((entity) => this.visible(entity));
    const keys = new Set(shown.map((entity) => entity.key));
    this.cy.batch(() => {
      this.cy.nodes().forEach((node) => {
        node.toggleClass("filtered", !keys.has(node.data("key") as string));
      });
    });
    shown.sort((a, b) => a.name.localeCompare(b.name));
    replaceChildren(
      byId("node-list"),
      ...shown.map((entity) => {
        const fresh = this.fresh.has(entity.key);
        const button = el("button", { type: "button", "data-testid": "node-item", "data-key": entity.key },
          entity.name, el("span", { class: "muted" }, ` ${entity.type}`),
          fresh ? el("span", { class: "badge", "data-testid": "node-new" }, "new") : null);
        button.addEventListener("click", () => void this.expand(entity.key));
        return el("li", {}, button);
      }),
    );
  }

  private select(selection: Selection): void {
    // Another element's chunk would be out of place under the new properties.
    if (JSON.stringify(selection) !== JSON.stringify(this.selection)) byId("graph-chunk").hidden = true;
    this.selection = selection;
    this.cy.elements().unselect();
    if (selection?.kind === "entity") this.cy.getElementById(nodeId(selection.key)).select();
    if (selection?.kind === "relation") this.cy.getElementById(selection.id).select();
    this.renderDetails();
  }

  private renderDetails(): void {
    const details = byId("details");
    const selection = this.selection;
    if (selection?.kind === "entity") {
      const entity = this.entities.get(selection.key);
      if (entity) {
        replaceChildren(details,
          el("h3", { "data-testid": "details-name" }, entity.name),
          el("p", { class: "muted", "data-testid": "details-type" }, entity.type),
          el("p", { "data-testid": "details-description" }, entity.description),
          ...this.sources(entity.file_paths, entity.source_chunk_ids));
        return;
      }
    }
    if (selection?.kind === "relation") {
      const relation = this.relations.get(selection.id);
      if (relation) {
        replaceChildren(details,
          el("h3", { "data-testid": "details-name" }, `${relation.source_name} — ${relation.target_name}`),
          el("p", { class: "muted" }, `weight ${relation.weight}`, relation.keywords.length ? ` · ${relation.keywords.join(", ")}` : ""),
          el("p", { "data-testid": "details-description" }, relation.description),
          ...this.sources(relation.file_paths, relation.source_chunk_ids));
        return;
      }
    }
    replaceChildren(details, el("p", { class: "muted" }, "Click a node or an edge."));
  }

  private sources(filePaths: string[], chunkIds: string[]): HTMLElement[] {
    const chunks = chunkIds.map((chunkId) => {
      const button = el("button", { type: "button", class: "link", "data-testid": "chunk-link", title: chunkId }, shortId(chunkId));
      button.addEventListener("click", () => void openChunk(chunkId, byId("graph-chunk")));
      return el("li", {}, button);
    });
    return [
      el("h4", {}, "Documents"),
      el("ul", { "data-testid": "details-documents" }, ...filePaths.map((path) => el("li", {}, path))),
      el("h4", {}, "Chunks"),
      el("ul", { "data-testid": "details-chunks" }, ...chunks),
    ];
  }
}

function fillSelect(select: HTMLSelectElement, options: [string, string][]): void {
  const current = select.value;
  replaceChildren(select, el("option", { value: "" }, "all"), ...options.map(([value, label]) => el("option", { value }, label)));
  select.value = options.some(([value]) => value === current) ? current : "";
}

/** A stable colour per entity type. */
function colorOf(type: string): string {
  let hash = 0;
  for (const char of type) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return `hsl(${hash % 360}, 55%, 58%)`;
}

/** "chunk-472618d801f7…" for a chunk id of a long hash; the whole id goes in the title. */
export function shortId(chunkId: string): string {
  return chunkId.length > 20 ? `${chunkId.slice(0, 18)}…` : chunkId;
}

/** Shows a chunk's text (as text) in a panel. */
export async function openChunk(chunkId: string, panel: HTMLElement): Promise<void> {
  panel.hidden = false;
  replaceChildren(panel, el("p", { class: "muted" }, `Loading ${chunkId}…`));
  try {
    const chunk = await fetchChunk(chunkId);
    replaceChildren(panel,
      el("h4", { title: chunk.chunk_id }, chunk.file_path || chunk.doc_id, el("span", { class: "muted" }, ` · ${shortId(chunk.chunk_id)}`)),
      el("pre", { "data-testid": "chunk-text" }, chunk.text));
  } catch (error) {
    replaceChildren(panel, el("p", { class: "error" }, String(error)));
  }
}
