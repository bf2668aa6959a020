"""MCP (Model Context Protocol) for agents: the gateway's servicers as MCP tools and
resources, over stdio (`kgstream mcp`) and Streamable HTTP (/mcp on the HTTP port)."""
