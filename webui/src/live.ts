// Live updates: GET /api/v1/events sends the index version at connect and whenever it moves;
// each move refreshes what is on screen. The indicator says the version and how fresh it is.

import { eventsUrl } from "./api";
import { byId } from "./dom";
import type { VersionInfo } from "./types";

export function watchVersion(onMove: (info: VersionInfo) => void): void {
  const indicator = byId("live");
  let latest: VersionInfo | null = null;
  let connected = false;

  const render = (): void => {
    if (latest === null) {
      indicator.textContent = connected ? "connected" : "connecting…";
      return;
    }
    const age = Math.max(0, Math.round((Date.now() - latest.changed_at_ms) / 1000));
    const waiting = latest.documents.pending + latest.documents.processing;
    const parts = [`v${latest.index_version}`, `updated ${formatAge(age)} ago`];
    if (waiting > 0) parts.push(`${waiting} pending`);
    if (latest.documents.failed > 0) parts.push(`${latest.documents.failed} failed`);
    if (!connected) parts.push("reconnecting…");
    indicator.textContent = parts.join(" · ");
    indicator.dataset.version = String(latest.index_version);
    indicator.dataset.state = connected ? "live" : "offline";
  };

  const source = new EventSource(eventsUrl());
  source.addEventListener("open", () => {
    connected = true;
    render();
  });
  source.addEventListener("error", () => {
    connected = false;
    render();
  });
  source.addEventListener("version", (event) => {
    connected = true;
    const info = JSON.parse((event as MessageEvent<string>).data) as VersionInfo;
    const moved = latest !== null && info.index_version !== latest.index_version;
    latest = info;
    render();
    if (moved) onMove(info);
  });
  window.setInterval(render, 1000);
}

function formatAge(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h`;
}
