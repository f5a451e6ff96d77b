"""The server's default caps on what one request, one tenant and the event streams may take (one
owner for the numbers `ServeConfig` and `presto-tui serve`'s flags share; no heavy imports, so the
command line reads them without starting the web stack).  What each guards: docs/serving.md."""

from __future__ import annotations

# the tokens and engine requests a request's chains may cost (its method's `cost`, runtime/methods/, times
# its chains): 16 chains of the default sampler at --max-steps 1024 and --max-tokens 4096 cost 2^32 tokens and
# about 2^20 engine requests, the SPS request (K 256, L 4096, M 4096, n 4096) 5.5e11 tokens a chain
MAX_REQUEST_TOKENS = 1 << 34
MAX_ENGINE_REQUESTS = 1 << 22
MAX_TENANT_TOKENS = 1 << 36  # a tenant's running and queued requests together: four requests at the cap
# what its chains may hold at once: engine requests live together (its method's `width` times its chains: SPS's
# K x M rollouts, best-of-N's samples, a population's members' budgets), and the memory they and their prompt take
# (`app.memory_bound`): at these defaults no request accepted takes the server past about 1 GB
MAX_LIVE_REQUESTS = 1024
MAX_REQUEST_MEMORY = 512 << 20
# a tenant's running and queued requests together hold at most twice one request's live requests, and one
# request's memory: a tenant within its caps leaves the engine's time and memory to the others
TENANT_LIVE_FACTOR = 2
MAX_EVENT_STREAMS = 128  # a quarter of --max-connections' default: listeners never take every slot
