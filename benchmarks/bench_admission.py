"""What a request within a server's caps may take from everyone else: issue 47's requests, replayed.

Starts `presto-tui serve` (a subprocess, on the loopback interface, the synthetic engine unless
`--backend` says otherwise, the default caps) with two tenants: `mallory` sends each item's request
while `bob` sends small completions one after another and a prober asks `/health` every 0.2 s.
Per item it prints: whether the request was accepted (its status, and the line of a refusal), the
server's peak RSS while it ran, bob's worst latency, `/health`'s worst latency, the server's RSS
before and after the request ended, and for a cancel how long the engine took to end the request's
work (its live engine requests at 0) after the cancel was answered.  An accepted request runs at
most `--item-s` seconds; then its client goes away (which cancels it).  Every loop stops by itself.

Goals (issue 47): bob's worst latency under 2 s, /health's under 0.5 s, no accepted request above
1 GB RSS, RSS back within 10% of its start after each, a cancelled request's engine work ended
within 2 s.

Run: python benchmarks/bench_admission.py                    # every item, about 5 minutes
     python benchmarks/bench_admission.py --items 1,2 --item-s 10
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

KEYS = {"mallory": "key-mallory", "bob": "key-bob"}
SMALL = {"prompt": "the cat", "max_tokens": 8, "steps": 4}
SPS = {"prompt": "a b", "sampler": "sps", "sps_top_k": 256, "sps_draws": 4096, "sps_rollouts": 4096, "max_tokens": 4,
       "sps_chunk": 2, "tau": 100}
BIG_PROMPT = "a b " * 250_000  # 1,000,000 characters (the body stays under the 1 MiB limit)


WARM_UP = [SMALL, {**SMALL, "sampler": "sps"}, {**SMALL, "sampler": "ppt"}, {**SMALL, "sampler": "bestofn"},
           {**SMALL, "sampler": "resample-move"}, {**SMALL, "prompt": "a b " * 1000}, {**SMALL, "n": 8}]


def ladder(n: int) -> str:
    return ",".join(f"{1 + 3 * i / n:.6f}" for i in range(n - 1)) + ",4"


# item -> (what it is, its body, cancel after this many seconds (None: no cancel))
ITEMS: dict[str, tuple[str, dict, float | None]] = {
    "1": ("SPS at the caps (K 256, L 4096, M 4096)", SPS, None),
    "1b": ("SPS with M 1024", {**SPS, "sps_rollouts": 1024}, None),
    "1c": ("SPS, the largest accepted (K 8, L 256, M 128)",
           {**SPS, "sps_top_k": 8, "sps_draws": 256, "sps_rollouts": 128, "max_tokens": 64}, None),
    "2": ("SPS M 2048, cancelled at 5 s", {**SPS, "sps_rollouts": 2048, "request_id": "sps-big-1"}, 5.0),
    "2b": ("SPS at 1024 live (K 8, L 256, M 128), n 512, cancelled at 0.4 s (it ends at EOS within 2 s)",
           {**SPS, "sps_top_k": 8, "sps_draws": 256, "sps_rollouts": 128, "max_tokens": 512,
            "request_id": "sps-big-2"}, 0.4),
    "2c": ("PowerMH at the caps (4096 tokens, 1024 steps, n 6), cancelled at 5 s",
           {"prompt": "a b", "max_tokens": 4096, "steps": 1024, "n": 6, "request_id": "mh-big"}, 5.0),
    "3": ("pt_ladder of 3,000 exponents", {"prompt": "a b", "sampler": "ppt", "pt_ladder": ladder(3000)}, None),
    "3b": ("pt_ladder of 10,001 exponents", {"prompt": "a b", "sampler": "ppt", "pt_ladder": ladder(10_001)}, None),
    "3c": ("pt_ladder of 64 exponents", {"prompt": "a b", "sampler": "ppt", "pt_ladder": ladder(64),
                                         "max_tokens": 256, "steps": 64}, None),
    "4": ("1 MB prompt, best-of-N 128", {"prompt": BIG_PROMPT, "sampler": "bestofn", "samples": 128,
                                         "max_tokens": 16}, None),
    "4b": ("1 MB prompt, best-of-N 512", {"prompt": BIG_PROMPT, "sampler": "bestofn", "samples": 512,
                                          "max_tokens": 16}, None),
    "4c": ("1 MB prompt, best-of-N 16", {"prompt": BIG_PROMPT, "sampler": "bestofn", "samples": 16,
                                         "max_tokens": 16}, None),
    "5": ("tempering 63 replicas, 4096 tokens, 1024 steps", {"prompt": "a b", "sampler": "ppt", "pt_replicas": 63,
                                                             "max_tokens": 4096, "steps": 1024}, None),
    "5b": ("resample-move 4096 particles, block 1024", {"prompt": "a b", "sampler": "resample-move",
                                                        "particles": 4096, "block_size": 1024,
                                                        "max_tokens": 1024}, None),
    "5d": ("tempering 6 replicas, 4096 tokens, 1024 steps", {"prompt": "a b", "sampler": "ppt", "pt_replicas": 6,
                                                            "max_tokens": 4096, "steps": 1024}, None),
    "5c": ("tempering 16 replicas, 1024 tokens, 256 steps", {"prompt": "a b", "sampler": "ppt", "pt_replicas": 16,
                                                             "max_tokens": 1024, "steps": 256}, None),
    "6": ("PowerMH n 72, 1024 tokens, 256 steps", {"prompt": "a b", "n": 72, "max_tokens": 1024, "steps": 256}, None),
    "6b": ("PowerMH n 63, 1024 tokens, 256 steps", {"prompt": "a b", "n": 63, "max_tokens": 1024, "steps": 256},
           None),
    "11": ("particles on powermh", {"prompt": "a b", "particles": 4}, None),
    "11b": ("pt_replicas on lowtemp", {"prompt": "a b", "sampler": "lowtemp", "pt_replicas": 4}, None),
}


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def metrics(url: str, key: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@dataclass
class Watch:
    """Bob's completions, /health and the server's RSS, sampled while an item runs."""

    url: str
    pid: int
    stop: threading.Event = field(default_factory=threading.Event)
    peak: float = 0.0
    bob_worst: float = 0.0
    bob_sent: int = 0
    bob_failed: list[str] = field(default_factory=list)
    health_worst: float = 0.0

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=f, daemon=True) for f in (self._rss, self._bob, self._health)]
        for t in threads:
            t.start()
        return threads

    def _rss(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_mib(self.pid))

    def _bob(self) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {KEYS['bob']}"}, timeout=20) as c:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    r = c.post(self.url + "/v1/completions", json=SMALL)
                    if r.status_code != 200:
                        self.bob_failed.append(f"{r.status_code} {r.text[:80]}")
                except httpx.HTTPError as e:
                    self.bob_failed.append(type(e).__name__)
                self.bob_worst = max(self.bob_worst, time.perf_counter() - t0)
                self.bob_sent += 1
                self.stop.wait(0.05)

    def _health(self) -> None:
        while not self.stop.wait(0.2):
            t0 = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(self.url + "/health", headers={"Authorization": f"Bearer {KEYS['bob']}"}, timeout=10)
            self.health_worst = max(self.health_worst, time.perf_counter() - t0)


def quiet(url: str, most_s: float) -> float:
    """Seconds until the server holds no chain and no engine request (at most `most_s`)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < most_s:
        m = metrics(url, KEYS["bob"])
        if m.get("presto_chains_live", 0) == 0 and m.get("presto_engine_requests_live", 0) == 0 \
                and m.get("presto_queue_length", 0) == 0:
            break
        time.sleep(0.05)
    return time.perf_counter() - t0


def run_item(url: str, pid: int, name: str, body: dict, cancel_at: float | None, item_s: float) -> dict[str, Any]:
    quiet(url, 30)
    time.sleep(0.5)
    before = rss_mib(pid)
    watch = Watch(url, pid)
    threads = watch.start()
    time.sleep(1.0)  # bob's latency alone first
    answer: dict[str, Any] = {}
    client = httpx.Client(headers={"Authorization": f"Bearer {KEYS['mallory']}"}, timeout=item_s)

    def send() -> None:
        t0 = time.perf_counter()
        try:
            r = client.post(url + "/v1/completions", json=body)
            answer["status"] = r.status_code
            try:
                answer["line"] = r.json()["error"]["message"] if r.status_code >= 400 else ""
            except (ValueError, KeyError, TypeError):
                answer["line"] = r.text[:200]
        except httpx.TimeoutException:
            answer["status"] = "left"  # ran past --item-s: the client goes away (the server cancels it)
            answer["line"] = ""
        answer["s"] = time.perf_counter() - t0

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    ended: float | None = None
    cancel_answer = ""
    if cancel_at is not None:
        sender.join(cancel_at)
        if sender.is_alive():
            r = httpx.post(url + f"/v1/presto/requests/{body['request_id']}/cancel",
                           headers={"Authorization": f"Bearer {KEYS['mallory']}"}, timeout=30)
            cancel_answer = f"{r.status_code} {r.text[:120]}"
            ended = quiet(url, 30)
    sender.join(item_s + 5)
    client.close()
    left = quiet(url, 60)
    if ended is None and answer.get("status") == "left":
        ended = left
    time.sleep(2.0)  # the memory freed given back
    after = rss_mib(pid)
    kept = metrics(url, KEYS["bob"]).get("presto_kept_event_bytes", 0) / (1 << 20)
    watch.stop.set()
    for t in threads:
        t.join(25)
    return {"item": name, "status": answer.get("status"), "line": answer.get("line", ""), "s": answer.get("s", 0.0),
            "before": before, "peak": watch.peak, "after": after, "bob": watch.bob_worst, "bob_n": watch.bob_sent,
            "bob_failed": watch.bob_failed, "health": watch.health_worst, "ended": ended, "cancel": cancel_answer,
            "kept": kept}


def small_checks(url: str, pid: int) -> list[str]:
    """Item 11's header and metrics checks."""
    out = []
    two = [("Authorization", f"Bearer {KEYS['bob']}"), ("Authorization", "Bearer wrong")]
    r = httpx.get(url + "/health", headers=two)
    out.append(f"two Authorization headers: {r.status_code} {r.text[:100]}")
    host, port = url.removeprefix("http://").split(":")
    before = metrics(url, KEYS["bob"]).get('presto_http_requests_total{code="408",route="completions"}', 0)
    socks = []
    for _ in range(8):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        socks.append(s)
    time.sleep(12)  # past --read-timeout (10 s)
    answers = []
    for s in socks:
        s.settimeout(2)
        try:
            answers.append(s.recv(64).split(b"\r\n")[0].decode())
        except OSError:
            answers.append("(nothing)")
        s.close()
    m = metrics(url, KEYS["bob"])
    got408 = m.get('presto_http_requests_total{code="408",route="completions"}', 0) - before
    got401 = m.get('presto_http_requests_total{code="401",route="completions"}', 0)
    out.append(f"8 dripped keyless bodies: clients read {sorted(set(answers))}; /metrics 408 +{got408:g}, "
               f"401 {got401:g}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", default=",".join(ITEMS), help=f"which (default all: {','.join(ITEMS)})")
    ap.add_argument("--item-s", type=float, default=20.0, help="an accepted request runs at most this long")
    ap.add_argument("--backend", default="synthetic")
    args = ap.parse_args()
    names = [n.strip() for n in args.items.split(",") if n.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    (work / "keys").write_text("".join(f"{t} {k}\n" for t, k in KEYS.items()))
    env = {**os.environ, "PRESTO_TUI_BACKEND": args.backend}
    exe = [sys.executable, "-c", "from presto_tui.cli import main; main()"]
    server = subprocess.Popen([*exe, "serve", "--port", "0", "--api-keys", str(work / "keys"), "--no-trace"],
                              env=env, stderr=subprocess.PIPE, text=True, cwd=work)
    rows = []
    try:
        seen = []
        while (line := server.stderr.readline()) and not (found := re.search(r"at (http://\S+)/v1", line)):
            seen.append(line)
        if not line:
            sys.exit(f"serve did not start: {''.join(seen)[-2000:]}")
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()  # (drained)
        url = found.group(1)
        print(f"server at {url} (pid {server.pid}), {args.backend} engine, default caps; RSS "
              f"{rss_mib(server.pid):.0f} MiB", flush=True)
        for body in WARM_UP:  # every method's modules loaded and the engine's caches warm: RSS from here
            httpx.post(url + "/v1/completions", json=body, timeout=120,
                       headers={"Authorization": f"Bearer {KEYS['bob']}"})
        print(f"warmed up: RSS {rss_mib(server.pid):.0f} MiB", flush=True)
        for i, name in enumerate(names):
            what, body, cancel_at = ITEMS[name]
            if "request_id" in body:  # (an item may be named twice: ids are never reused)
                body = {**body, "request_id": f"{body['request_id']}-{i}"}
            row = run_item(url, server.pid, name, body, cancel_at, args.item_s)
            row["what"] = what
            rows.append(row)
            print(f"  {name}: {what}: {row['status']} in {row['s']:.1f} s; peak {row['peak']:.0f} MiB, bob worst "
                  f"{row['bob']:.2f} s ({row['bob_n']} sent, {len(row['bob_failed'])} failed), /health worst "
                  f"{row['health']:.2f} s, RSS {row['before']:.0f} -> {row['after']:.0f} MiB"
                  + (f", cancel: {row['cancel']}" if row["cancel"] else "")
                  + (f", ended {row['ended']:.2f} s after" if row["ended"] is not None else ""), flush=True)
        checks = small_checks(url, server.pid) if "11" in names else []
    finally:
        server.terminate()
        server.wait(60)
    print()
    print("| item | request | answer | peak RSS MiB | bob worst s | /health worst s | RSS before -> after MiB | "
          "kept events MiB | work ended after cancel/leave s | goals |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        accepted = r["status"] in (200, "left")
        missed = []
        if r["bob"] >= 2 or r["bob_failed"]:
            missed.append("bob")
        if r["health"] >= 0.5:
            missed.append("health")
        if accepted and r["peak"] > 1024:
            missed.append("1 GB")
        if r["after"] > 1.1 * r["before"]:
            missed.append("RSS back")
        if r["ended"] is not None and r["ended"] > 2:
            missed.append("ended")
        line = f"{r['status']}" + (f": {r['line'][:150]}" if r["line"] else "") + (
            f" (cancel: {r['cancel']})" if r["cancel"] else "")
        ended = f"{r['ended']:.2f}" if r["ended"] is not None else "-"
        print(f"| {r['item']} | {r['what']} | {line.replace('|', '/')} | {r['peak']:.0f} | {r['bob']:.2f} | "
              f"{r['health']:.2f} | {r['before']:.0f} -> {r['after']:.0f} | {r['kept']:.1f} | {ended} | "
              f"{'met' if not missed else 'missed: ' + ', '.join(missed)} |")
    for c in checks:
        print(f"- {c}")


if __name__ == "__main__":
    main()
