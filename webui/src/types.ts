// The JSON shapes of the HTTP API (proto field names; see protos/kgstream/v1/*.proto).

export interface Entity {
  key: string;
  name: string;
  type: string;
  description: string;
  source_chunk_ids: string[];
  file_paths: string[];
  doc_ids: string[];
}

export interface Relation {
  source: string;
  target: string;
  source_name: string;
  target_name: string;
  keywords: string[];
  description: string;
  weight: number;
  source_chunk_ids: string[];
  file_paths: string[];
  doc_ids: string[];
}

export interface ScoredEntity {
  entity: Entity;
  score: number;
  degree: number;
}

export interface Subgraph {
  entities: Entity[];
  relations: Relation[];
  truncated: boolean;
  index_version: number;
}

export interface Chunk {
  chunk_id: string;
  doc_id: string;
  file_path: string;
  text: string;
  index_version?: number;
  score?: number;
}

export interface Reference {
  reference_id: string;
  file_path: string;
  chunk_ids: string[];
}

export interface RetrievalResult {
  mode: string;
  entities: ScoredEntity[];
  relations: { relation: Relation; score: number; degree: number }[];
  chunks: Chunk[];
  references: Reference[];
  index_version: number;
}

export interface Document {
  doc_id: string;
  status: string;
  file_path: string;
  content_hash: string;
  chunk_ids: string[];
  preview: string;
  length: number;
  reason: string;
  created_at_ms: number;
  updated_at_ms: number;
  chunks_settled: number; // while processing: of chunks_changed, how many are done
  chunks_changed: number;
}

export interface DocumentPage {
  documents: Document[];
  next_page_token: string;
  total: number;
  index_version: number;
}

export interface VersionInfo {
  index_version: number;
  documents: { pending: number; processing: number; processed: number; failed: number };
  changed_at_ms: number;
}

export interface RetryResult {
  retried: string[];
  not_retried: { doc_id: string; reason: string }[];
}
