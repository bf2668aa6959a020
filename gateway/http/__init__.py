"""The gateway over HTTP: the JSON API, the OpenAI-compatible chat endpoint and the web UI."""
