// Builds into the Python package (gateway/http/webui/), which the HTTP server serves at "/":
// scripts/build-webui runs this, and tests/webui/test_build.py checks that the committed
// assets are what it builds.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: {
    outDir: fileURLToPath(new URL("../gateway/http/webui", import.meta.url)),
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    reportCompressedSize: false,
    // One script and one stylesheet keep the served tree small and the build easy to compare.
    chunkSizeWarningLimit: 1024,
  },
  // `npm run dev`: the UI from source, the API from a running kgstream (a real one, never a mock).
  server: {
    host: "127.0.0.1",
    port: 19610,
    strictPort: true,
    proxy: Object.fromEntries(
      ["/api", "/v1", "/openapi.json"].map((path) => [path, process.env.KGSTREAM_HTTP_URL ?? "http://127.0.0.1:9621"]),
    ),
  },
});
