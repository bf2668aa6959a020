// A text/event-stream parser for fetch bodies: EventSource cannot POST, so the streamed
// query reads the response body itself (https://html.spec.whatwg.org/#event-stream-interpretation).

export interface ServerEvent {
  event: string;
  data: string;
}

/** Yields the events of a text/event-stream body as they arrive. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value, { stream: !done });
      if (done) buffer += "\n\n";
      let end: number;
      while ((end = lineEnd(buffer)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer[end] === "\r" && buffer[end + 1] === "\n" ? end + 2 : end + 1);
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
      }
      if (done) break;
    }
  } finally {
    reader.releaseLock();
  }
}

function lineEnd(buffer: string): number {
  const cr = buffer.indexOf("\r");
  const lf = buffer.indexOf("\n");
  if (cr < 0) return lf;
  // A lone "\r" at the end may be the first half of "\r\n": wait for the next read.
  if (cr === buffer.length - 1) return lf >= 0 && lf < cr ? lf : -1;
  return lf < 0 ? cr : Math.min(cr, lf);
}
