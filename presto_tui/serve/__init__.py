"""`presto-tui serve`: an OpenAI-compatible HTTP front on one engine loop, and its client.

- `host.py`: the one thread that owns the engine, its loop and the trace;
- `pool.py`: `--workers`: several such hosts as Ray workers, standing for the one;
- `hub.py`: the asyncio side's book of requests, admission, ids and event listeners;
- `tenants.py`: API keys and the tenants they name;
- `protocol.py`: OpenAI request bodies in (through the CLI's validation gate), answers out;
- `wire.py`: events as JSON on the wire (the trace's lines, plus the transient ones);
- `app.py`: the routes (FastAPI), the keys' tenants, body limits and caps, timeouts, disconnects;
- `net.py`: the listening socket, uvicorn with deadlines for headers and bodies and a cap on connections;
- `limits.py`: the default caps on what a request, a tenant and the event streams may take;
- `metrics.py`: `/metrics` in Prometheus' text format;
- `client.py`: the app's worker side on a remote server (`presto-tui chat --connect`).

Needs the `serve` extra (FastAPI, uvicorn, prometheus-client); the client needs httpx.
"""
