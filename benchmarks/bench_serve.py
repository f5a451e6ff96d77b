"""Load test of `presto-tui serve` on the loopback interface, with the official openai client.

Starts `presto-tui serve` (a subprocess, like any deployment), then:
1. one by one: every prompt from one client, one after another (the baseline);
2. at once: the same prompts from `--clients` concurrent clients; a quarter of the clients
   (`--leave`) also start a streamed request each and go away midway;
3. checks: no request lost (every answer 200), none mixed up (each answer token for token
   what `presto-tui run --json` gives for its prompt), and after the clients that left,
   `/metrics` shows no live chain and no live engine request.
Prints requests per minute one by one and at once, as measured.

Run: python benchmarks/bench_serve.py --backend synthetic                       # 64 requests, 16 clients
     python benchmarks/bench_serve.py --backend vllm --requests 16 --clients 8 -n 32 -K 6
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


def prompts_for(backend: str, n: int) -> list[str]:
    """`n` distinct prompts (distinct, so that a mixed-up answer cannot pass for the right one)."""
    if backend == "synthetic":
        return [f"{WORDS[i % len(WORDS)]} {'and ' * (i // len(WORDS))}then".strip() for i in range(n)]
    base = [ln for ln in (ROOT / "presto_tui/data/prompts.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
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
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--leave", type=float, default=0.25, help="share of clients that also go away midway")
    ap.add_argument("-n", "--max-new-tokens", type=int, default=16)
    ap.add_argument("-K", "--steps", type=int, default=10)
    ap.add_argument("-N", "--budget", type=int, default=8)
    ap.add_argument("--prefetch", default="spine")
    ap.add_argument("-C", "--max-chains", type=int, default=None,
                    help="server's --max-chains (each worker's) [default: clients]")
    ap.add_argument("-W", "--workers", type=int, default=None, help="server's --workers [default: one engine, no Ray]")
    args = ap.parse_args()
    prompts = prompts_for(args.backend, args.requests)
    sizes = ["-n", str(args.max_new_tokens), "-K", str(args.steps), "-N", str(args.budget),
             "--prefetch", args.prefetch]
    env = {**os.environ, "PRESTO_TUI_BACKEND": args.backend}
    exe = [sys.executable, "-c", "from presto_tui.cli import main; main()"]
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    (work / "prompts.txt").write_text("\n".join(prompts) + "\n")

    print(f"twins: presto-tui run --prompts-file ({len(prompts)} prompts) {' '.join(sizes)}", flush=True)
    t0 = time.perf_counter()
    res = subprocess.run([*exe, "run", "--prompts-file", str(work / "prompts.txt"), "--json", "--no-trace", *sizes],
                         env=env, capture_output=True, text=True, cwd=work)
    if res.returncode:
        sys.exit(f"run failed: {res.stderr.strip().splitlines()[-1]}")
    twins = [json.loads(ln)["tokens"] for ln in res.stdout.splitlines() if ln.strip()]
    print(f"twins: {time.perf_counter() - t0:.1f} s (engine start included)", flush=True)

    scale = ["--workers", str(args.workers)] if args.workers else []
    server = subprocess.Popen([*exe, "serve", "--port", "0", "-C", str(args.max_chains or args.clients),
                               "--max-queue", str(args.requests + args.clients), "--trace",
                               str(work / "serve.jsonl"), *scale, *sizes], env=env, stderr=subprocess.PIPE,
                              text=True, cwd=work)
    try:
        seen = []
        while (line := server.stderr.readline()) and not (found := re.search(r"at (http://\S+)/v1", line)):
            seen.append(line)  # (Ray may say something first)
        if not line:
            sys.exit(f"serve did not start: {''.join(seen)[-2000:]}")
        url = found.group(1)
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=3600)
        model = client.models.list().data[0].id

        def ask(i: int) -> list[int]:
            r = client.completions.create(model=model, prompt=prompts[i], max_tokens=args.max_new_tokens)
            return r.model_extra["presto"]["choices"][0]["tokens"]

        print(f"server: {model} ({args.backend}) at {url}, -C {args.max_chains or args.clients}"
              + (f", {args.workers} workers" if args.workers else ""), flush=True)
        t0 = time.perf_counter()
        one_by_one = [ask(i) for i in range(len(prompts))]
        t_one = time.perf_counter() - t0

        todo: queue.Queue[int] = queue.Queue()
        for i in range(len(prompts)):
            todo.put(i)
        answers: dict[int, list[int]] = {}
        failures: list[str] = []
        leavers = int(round(args.clients * args.leave))
        gone: list[int] = []

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

        def worker(c: int) -> None:
            if c < leavers:
                leave_midway(c)
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    answers[i] = ask(i)
                except Exception as e:
                    failures.append(f"request {i}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=worker, args=(c,)) for c in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_many = time.perf_counter() - t0
        end = time.monotonic() + 30
        while time.monotonic() < end and (m := metrics(url))["presto_chains_live"]:
            time.sleep(0.1)
        m = metrics(url)
    finally:
        server.terminate()
        server.wait(60)

    lost = [i for i in range(len(prompts)) if i not in answers]
    mixed = [i for i in answers if answers[i] != twins[i]]
    mixed_one = [i for i in range(len(prompts)) if one_by_one[i] != twins[i]]
    print(f"\n{len(prompts)} requests from {args.clients} clients ({leavers} of them also left a streamed request "
          "midway)")
    print(f"lost: {len(lost)}   failed: {len(failures)}   mixed up: {len(mixed)} at once, {len(mixed_one)} one by one")
    for f in failures[:5]:
        print("  " + f)
    print(f"one by one: {t_one:.1f} s, {60 * len(prompts) / t_one:.1f} requests per minute")
    print(f"at once:    {t_many:.1f} s, {60 * len(prompts) / t_many:.1f} requests per minute "
          f"({t_one / t_many:.2f}x)")
    done, cancelled = (m[f'presto_chains_total{{status="{s}"}}'] for s in ("done", "cancelled"))
    print(f"after: chains live {m['presto_chains_live']:g}, engine requests live {m['presto_engine_requests_live']:g}, "
          f"chains done {done:g}, cancelled {cancelled:g} (clients that left: {len(gone)})")
    print(f"trace: {work / 'serve.jsonl'}")


if __name__ == "__main__":
    main()
