"""A world served to clients outside spadework: export as a standalone API, HTTP sessions, MCP, the socket."""
