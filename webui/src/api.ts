// The HTTP API client: one place that adds the token and turns error bodies into messages.

import { readEvents, type ServerEvent } from "./sse";
import type {
  Chunk,
  DocumentPage,
  RetrievalResult,
  RetryResult,
  ScoredEntity,
  Subgraph,
} from "./types";

const TOKEN_KEY = "kgstream.token";

/** Moves `?token=` from the address into sessionStorage, out of history and screenshots. */
export function adoptUrlToken(): void {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token === null) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  url.searchParams.delete("token");
  window.history.replaceState(window.history.state, "", url);
}

function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function request(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const bearer = token();
  if (bearer !== null) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await errorOf(response);
  return response;
}

async function errorOf(response: Response): Promise<ApiError> {
  let code = `HTTP_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const payload = (await response.json()) as { error?: { code?: string; message?: string } };
    if (payload.error?.code) code = payload.error.code;
    if (payload.error?.message) message = payload.error.message;
  } catch {
    // Not JSON: keep the status line.
  }
  const hint = response.status === 401 ? " (open the UI as /?token=YOUR_TOKEN)" : "";
  return new ApiError(response.status, code, `${code}: ${message}${hint}`);
}

async function getJson<T>(path: string): Promise<T> {
  return (await (await request("GET", path)).json()) as T;
}

function query(parameters: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters)) {
    if (value !== undefined && value !== "") search.set(name, String(value));
  }
  return search.toString();
}

export function searchEntities(q: string, limit = 20): Promise<{ entities: ScoredEntity[] }> {
  return getJson(`/api/v1/entities?${query({ q, limit })}`);
}

export function fetchSubgraph(seed: string, depth = 1, maxNodes = 200): Promise<Subgraph> {
  return getJson(`/api/v1/subgraph?${query({ seed, depth, max_nodes: maxNodes })}`);
}

export function fetchChunk(chunkId: string): Promise<Chunk> {
  return getJson(`/api/v1/chunks/${encodeURIComponent(chunkId)}`);
}

export function listDocuments(status: string, pageSize: number, pageToken: string): Promise<DocumentPage> {
  return getJson(`/api/v1/documents?${query({ status, page_size: pageSize, page_token: pageToken })}`);
}

/** Doc ids may contain "/": each segment is encoded, the slashes stay. */
function documentPath(docId: string): string {
  return `/api/v1/documents/${docId.split("/").map(encodeURIComponent).join("/")}`;
}

export async function deleteDocument(docId: string): Promise<void> {
  await request("DELETE", documentPath(docId));
}

export async function retryFailed(): Promise<RetryResult> {
  return (await (await request("POST", "/api/v1/retry-failed")).json()) as RetryResult;
}

export interface QueryRequest {
  question: string;
  mode: string;
  top_k: number;
  chunk_top_k: number;
  include_references: boolean;
}

export interface QueryHandlers {
  context(result: RetrievalResult): void;
  delta(text: string): void;
  done(summary: { usage: Record<string, number>; index_version: number; llm_configured: boolean }): void;
}

/** POSTs the question and hands each server-sent event to its handler. */
export async function streamQuery(body: QueryRequest, on: QueryHandlers, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = { "Content-Type": "application/json", Accept: "text/event-stream" };
  const bearer = token();
  if (bearer !== null) headers.Authorization = `Bearer ${bearer}`;
  const response = await fetch("/api/v1/query/stream", {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  if (response.body === null) throw new Error("the streamed answer has no body");
  let finished = false;
  for await (const event of readEvents(response.body)) {
    finished = dispatch(event, on) || finished;
  }
  if (!finished) throw new Error("the answer stream ended before its done event");
}

function dispatch(event: ServerEvent, on: QueryHandlers): boolean {
  const data = JSON.parse(event.data) as unknown;
  switch (event.event) {
    case "context":
      on.context(data as RetrievalResult);
      return false;
    case "delta":
      on.delta((data as { text: string }).text);
      return false;
    case "done":
      on.done(data as Parameters<QueryHandlers["done"]>[0]);
      return true;
    case "error": {
      const error = (data as { error?: { code?: string; message?: string } }).error ?? {};
      throw new ApiError(200, error.code ?? "UNKNOWN", `${error.code ?? "error"}: ${error.message ?? ""}`);
    }
    default:
      return false;
  }
}

/** The address of the live events stream (EventSource cannot send headers: the token goes in the query). */
export function eventsUrl(): string {
  const bearer = token();
  return bearer === null ? "/api/v1/events" : `/api/v1/events?${query({ access_token: bearer })}`;
}
