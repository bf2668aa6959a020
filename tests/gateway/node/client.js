// A Node.js client of the kgstream gateway, for the cross-language test
// (tests/gateway/test_node_client.py). Loads the .proto files at run time with
// proto-loader (no generated code), calls Query, QueryStream and Retrieve with the
// same request, and prints one JSON object:
//   {"query": QueryResponse, "stream": [QueryEvent, ...], "retrieve": RetrievalResult}
// or {"error": {"code": ..., "details": ...}} with exit code 1.
//
// Usage: node client.js HOST:PORT [REQUEST_JSON]
//   REQUEST_JSON is a kgstream.v1.QueryRequest in proto field names
//   (default {"question": "Who leads the Atlas Project?"}).
//   KGSTREAM_TOKEN in the environment is sent as "authorization: Bearer <token>".
"use strict";

const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

// The proto root: imports read "kgstream/v1/...", as buf and protoc -I protos see them.
const PROTO_ROOT = path.resolve(__dirname, "..", "..", "..", "protos");

function loadKnowledgeGraph() {
  const definition = protoLoader.loadSync("kgstream/v1/query.proto", {
    includeDirs: [PROTO_ROOT],
    keepCase: true, // field names as in the .proto, like the Python side
    longs: String, // int64 as decimal strings: exact for any value
    enums: String,
    defaults: true,
    oneofs: true, // QueryEvent.event names the field that is set
  });
  return grpc.loadPackageDefinition(definition).kgstream.v1.KnowledgeGraph;
}

function metadata() {
  const md = new grpc.Metadata();
  if (process.env.KGSTREAM_TOKEN) {
    md.set("authorization", `Bearer ${process.env.KGSTREAM_TOKEN}`);
  }
  return md;
}

function deadline() {
  return new Date(Date.now() + 30000);
}

function unary(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(), { deadline: deadline() }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

function serverStream(client, method, request) {
  return new Promise((resolve, reject) => {
    const events = [];
    const call = client[method](request, metadata(), { deadline: deadline() });
    call.on("data", (event) => events.push(event));
    call.on("error", reject);
    call.on("end", () => resolve(events));
  });
}

async function main() {
  const address = process.argv[2];
  if (!address) {
    process.stderr.write("usage: node client.js HOST:PORT [REQUEST_JSON]\n");
    process.exit(2);
  }
  const request = process.argv[3]
    ? JSON.parse(process.argv[3])
    : { question: "Who leads the Atlas Project?" };
  const KnowledgeGraph = loadKnowledgeGraph();
  const client = new KnowledgeGraph(address, grpc.credentials.createInsecure());
  try {
    const query = await unary(client, "Query", request);
    const stream = await serverStream(client, "QueryStream", request);
    const retrieve = await unary(client, "Retrieve", request);
    process.stdout.write(JSON.stringify({ query, stream, retrieve }) + "\n");
  } catch (error) {
    process.stdout.write(
      JSON.stringify({ error: { code: error.code, details: error.details } }) + "\n",
    );
    process.exitCode = 1;
  } finally {
    client.close();
  }
}

main();
