"""`/metrics` in Prometheus' text format, read from the engine thread's and the hub's own numbers.

A collector reads them when scraped, so nothing is updated twice and every
server (tests start several in one process) has its own registry.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from presto_tui.serve.host import RATE_WINDOW_S
from presto_tui.serve.hub import Hub


class ServerCollector(Collector):
    def __init__(self, host, hub: Hub, http: collections.Counter[tuple[str, int]]):  # host: EngineHost or Pool
        self.host, self.hub, self.http = host, hub, http

    def collect(self) -> Iterator[Metric]:
        host, hub = self.host, self.hub
        http = CounterMetricFamily("presto_http_requests", "HTTP requests answered, by route and status code",
                                   labels=["route", "code"])
        for (route, code), n in sorted(self.http.items()):
            http.add_metric([route, str(code)], n)
        yield http
        yield GaugeMetricFamily("presto_requests_in_progress", "Completion requests admitted and not yet answered",
                                value=hub.live_requests)
        yield GaugeMetricFamily("presto_event_streams", "Event streams open (GET /v1/presto/events)",
                                value=hub.listeners)
        yield GaugeMetricFamily("presto_event_stream_backlog_bytes", "Bytes the event streams hold, not yet sent",
                                value=hub.listener_backlog)
        yield CounterMetricFamily("presto_event_streams_dropped", "Event streams dropped for falling too far behind",
                                  value=hub.listeners_dropped)
        yield GaugeMetricFamily("presto_kept_event_bytes", "Bytes of recorded events kept for late listeners",
                                value=hub.kept_bytes)
        yield GaugeMetricFamily("presto_chains_live", "Chains running on the engine loop", value=host.chains_live)
        yield GaugeMetricFamily("presto_queue_length", "Chains admitted and waiting for a slot on the engine loop",
                                value=host.chains_waiting)
        yield GaugeMetricFamily("presto_engine_requests_live", "Requests live in the engine (submitted, not finished "
                                "or aborted)", value=host.engine_live)
        ends = CounterMetricFamily("presto_chains", "Chains ended, by how they ended", labels=["status"])
        for status in ("done", "cancelled", "error", "refused"):
            ends.add_metric([status], hub.chain_ends[status])
        yield ends
        yield CounterMetricFamily("presto_transitions", "MH transitions made", value=host.transitions)
        yield GaugeMetricFamily("presto_transitions_per_second",
                                f"MH transitions per second over the last {RATE_WINDOW_S:g} s",
                                value=host.transitions_per_s())
        yield CounterMetricFamily("presto_engine_steps", "Engine steps taken", value=host.steps)
        yield CounterMetricFamily("presto_engine_faults", "Engine failures (each ended every chain open then)",
                                  value=host.faults)
        workers = host.worker_numbers()
        if workers:  # serve --workers: each engine worker's own
            for name, key, text, kind in (
                    ("presto_worker_up", "status", "1 while the engine worker runs, 0 once it died", GaugeMetricFamily),
                    ("presto_worker_chains_assigned", "chains_assigned", "Chains sent to the worker, not ended",
                     GaugeMetricFamily),
                    ("presto_worker_chains_live", "chains_live", "Chains running on the worker's engine loop",
                     GaugeMetricFamily),
                    ("presto_worker_queue_length", "queue", "Chains waiting for a slot on the worker's engine",
                     GaugeMetricFamily),
                    ("presto_worker_engine_steps", "steps", "Engine steps the worker took", CounterMetricFamily)):
                family = kind(name, text, labels=["worker"])
                for w in workers:
                    family.add_metric([str(w["worker"])], float(w[key] == "ok") if key == "status" else w[key])
                yield family


def registry(host, hub: Hub, http: collections.Counter[tuple[str, int]]) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(ServerCollector(host, hub, http))
    return reg


def render(reg: CollectorRegistry) -> bytes:
    return generate_latest(reg)
