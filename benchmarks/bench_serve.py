"""Load test of `presto-tui serve` on the loopback interface, with the official openai client.

Starts `presto-tui serve` (a subprocess, like any deployment), then:
1. at each client count of `--clients` (default 1, 4, 8), for each rule of `--prefetch` in turn
   (default none, stream: the sequential sampler against the streaming rule, each request asking for
   its rule): every prompt from that many concurrent clients; requests per minute, and each rule's
   over the first's at the same client count, measured side by side;
2. a quarter of the clients (`--leave`) of the last round also start a streamed request each and go
   away midway;
3. checks: no request lost (every answer 200), none mixed up (each answer, under every rule, token for
   token what `presto-tui run --json` gives for its prompt), and after the clients that left,
   `/metrics` shows no live chain and no live engine request.
Times are the wall clock's: on the synthetic engine (a virtual clock) they are the server's own work,
not a speed; measure on a real engine, alone on the machine.

Run: python benchmarks/bench_serve.py --backend synthetic                       # 64 requests at 1, 4, 8 clients
     python benchmarks/bench_serve.py --backend vllm --requests 16 -n 64 -K 16 --prompts-file P
     python benchmarks/bench_serve.py --backend synthetic --workers 2             # two engines (Ray workers)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import openai

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["the cat", "a dog ran", "the tree", "small red home", "it was warm", "then it slept", "the big mat",
         "a cat sat on the mat"]


def prompts_for(backend: str, n: int, path: str | None = None) -> list[str]:
    """`n` distinct prompts (distinct, so that a mixed-up answer cannot pass for the right one): from
    `path`'s lines in turn, else the shipped set (or, on the synthetic engine, its demo words)."""
    if path is None and backend == "synthetic":
        return [f"{WORDS[i % len(WORDS)]} {'and ' * (i // len(WORDS))}then".strip() for i in range(n)]
    source = Path(path) if path else ROOT / "presto_tui/data/prompts.txt"
    base = [ln for ln in source.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return [base[i % len(base)] + ("" if i < len(base) else f" (variant {i // len(base)})") for i in range(n)]


def metrics(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="synthetic")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--prompts-file", default=None, help="one prompt per line ('#' lines skipped), used in turn")
    ap.add_argument("--clients", default="1,4,8", help="comma-separated client counts")
    ap.add_argument("--leave", type=float, default=0.25, help="share of clients that also go away midway")
    ap.add_argument("-n", "--max-new-tokens", type=int, default=16)
    ap.add_argument("-K", "--steps", type=int, default=10)
    ap.add_argument("-N", "--budget", default=None, help="the streaming rules' budget (-N): N, auto, cost:N, ...")
    ap.add_argument("--prefetch", default="none,stream", help="comma-separated rules each request asks for in turn")
    ap.add_argument("-C", "--max-chains", type=int, default=None,
                    help="server's --max-chains (each worker's) [default: the most clients]")
    ap.add_argument("-W", "--workers", type=int, default=None, help="server's --workers [default: one engine, no Ray]")
    ap.add_argument("--synthetic-cost", default=None, help="the synthetic engine's --synthetic-cost")
    args = ap.parse_args()
    levels = [int(c) for c in args.clients.split(",") if c.strip()]
    rules = [r.strip() for r in args.prefetch.split(",") if r.strip()]
    prompts = prompts_for(args.backend, args.requests, args.prompts_file)
    sizes = ["-n", str(args.max_new_tokens), "-K", str(args.steps)]
    engine = ["--synthetic-cost", args.synthetic_cost] if args.synthetic_cost else []
    env = {**os.environ, "PRESTO_TUI_BACKEND": args.backend}
    exe = [sys.executable, "-c", "from presto_tui.cli import main; main()"]
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    (work / "prompts.txt").write_text("\n".join(prompts) + "\n")

    def body(rule: str) -> dict:
        """What a request asks for besides its prompt: its rule (and the streaming rules' budget)."""
        return {"prefetch": rule, **({"budget": args.budget} if args.budget and rule != "none" else {})}

    print(f"twins: presto-tui run --prompts-file ({len(prompts)} prompts) {' '.join(sizes)} --prefetch none",
          flush=True)
    t0 = time.perf_counter()
    res = subprocess.run([*exe, "run", "--prompts-file", str(work / "prompts.txt"), "--json", "--no-trace", *sizes,
                          "--prefetch", "none", *engine], env=env, capture_output=True, text=True, cwd=work)
    if res.returncode:
        sys.exit(f"run failed: {res.stderr.strip().splitlines()[-1]}")
    twins = [json.loads(ln)["tokens"] for ln in res.stdout.splitlines() if ln.strip()]
    print(f"twins: {time.perf_counter() - t0:.1f} s (engine start included)", flush=True)

    scale = ["--workers", str(args.workers)] if args.workers else []
    most = max(levels)
    server = subprocess.Popen([*exe, "serve", "--port", "0", "-C", str(args.max_chains or most),
                               "--max-queue", str(args.requests + most), "--trace", str(work / "serve.jsonl"),
                               *scale, *sizes, *engine], env=env, stderr=subprocess.PIPE, text=True, cwd=work)
    failures: list[str] = []
    mixed: list[tuple[str, int, int]] = []
    lost = 0
    timings: dict[tuple[int, str], float] = {}
    gone: list[int] = []
    leavers = 0
    try:
        seen = []
        while (line := server.stderr.readline()) and not (found := re.search(r"at (http://\S+)/v1", line)):
            seen.append(line)  # (Ray may say something first)
        if not line:
            sys.exit(f"serve did not start: {''.join(seen)[-2000:]}")
        url = found.group(1)
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=3600)
        model = client.models.list().data[0].id
        print(f"server: {model} ({args.backend}) at {url}, -C {args.max_chains or most}"
              + (f", {args.workers} workers" if args.workers else ""), flush=True)

        def ask(i: int, rule: str) -> list[int]:
            r = client.completions.create(model=model, prompt=prompts[i], max_tokens=args.max_new_tokens,
                                          extra_body=body(rule))
            return r.model_extra["presto"]["choices"][0]["tokens"]

        def leave_midway(k: int) -> None:
            """A streamed request whose client goes away while its chain runs (a long chain, so that it
            is still running then on any engine)."""
            with httpx.stream("POST", url + "/v1/completions", timeout=600, json={
                    "prompt": prompts[k % len(prompts)], "max_tokens": args.max_new_tokens,
                    "steps": 100 * args.steps, "stream": True}) as r:
                lines = r.iter_lines()
                next(lines)
                time.sleep(0.3)
            gone.append(k)

        def round_of(clients: int, rule: str, leaving: int = 0) -> None:
            nonlocal lost
            todo: queue.Queue[int] = queue.Queue()
            for i in range(len(prompts)):
                todo.put(i)
            answers: dict[int, list[int]] = {}

            def worker(c: int) -> None:
                if c < leaving:
                    leave_midway(c)
                while True:
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        answers[i] = ask(i, rule)
                    except Exception as e:
                        failures.append(f"{rule}, {clients} clients, request {i}: {type(e).__name__}: {e}")

            threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took = time.perf_counter() - t0
            if not leaving:  # (the round with clients that leave checks; it is not timed)
                timings[(clients, rule)] = took
            lost += sum(i not in answers for i in range(len(prompts)))
            mixed.extend((rule, clients, i) for i in answers if answers[i] != twins[i])
            print(f"  {clients} clients, {rule}" + (f", {leaving} leaving" if leaving else "") + f": {took:.1f} s",
                  flush=True)

        for clients in levels:  # interleaved: each client count runs every rule, one after another
            for rule in rules:
                round_of(clients, rule)
        leavers = int(round(most * args.leave))
        if leavers:
            round_of(most, rules[-1], leavers)
        end = time.monotonic() + 30
        while time.monotonic() < end and (m := metrics(url))["presto_chains_live"]:
            time.sleep(0.1)
        m = metrics(url)
    finally:
        server.terminate()
        server.wait(60)

    print(f"\n{len(prompts)} requests, n={args.max_new_tokens}, K={args.steps}"
          + (f", -N {args.budget}" if args.budget else "") + "; each rule at each client count in turn")
    print(f"{'clients':>8} {'rule':<10} {'s':>8} {'req/min':>9} {'x ' + rules[0]:>9}")
    for clients in levels:
        for rule in rules:
            t = timings[(clients, rule)]
            print(f"{clients:>8} {rule:<10} {t:>8.1f} {60 * len(prompts) / t:>9.1f} "
                  f"{timings[(clients, rules[0])] / t:>8.2f}x")
    print(f"lost: {lost}   failed: {len(failures)}   mixed up: {len(mixed)} (every rule's answers against run's)")
    for f in failures[:5]:
        print("  " + f)
    for rule, clients, i in mixed[:5]:
        print(f"  mixed up: {rule}, {clients} clients, request {i}")
    done, cancelled = (m[f'presto_chains_total{{status="{s}"}}'] for s in ("done", "cancelled"))
    print(f"after {leavers} clients left a streamed request midway: chains live {m['presto_chains_live']:g}, engine "
          f"requests live {m['presto_engine_requests_live']:g}, chains done {done:g}, cancelled {cancelled:g} "
          f"(clients that left: {len(gone)})")
    print(f"trace: {work / 'serve.jsonl'}")
    if lost or failures or mixed:
        sys.exit(1)


if __name__ == "__main__":
    main()
