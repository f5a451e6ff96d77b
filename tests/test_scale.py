"""Scale-out: many prompts on Ray workers, and vLLM's records from any process.

A local Ray instance with two workers on the synthetic engine gives, prompt for
prompt, what one engine gives; a worker killed mid-run loses nothing (its
prompts finish on the other); Ctrl-C keeps every finished session.  Bad
scale-out input is refused in one line before any engine starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import presto_command, wait_for
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams

ray = pytest.importorskip("ray") if os.environ.get("CI") != "true" else __import__("ray")
runner = CliRunner()
PROMPTS = ["the cat", "a dog ran", "the tree", "small red home", "it was warm", "then it slept"]
pytestmark = pytest.mark.usefixtures("in_tmp")


def prompts_file(tmp_path: Path) -> Path:
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n")
    return f


def run_json(*args) -> list[dict]:
    res = runner.invoke(app, ["run", *args, "--json", "--no-trace"])
    assert res.exit_code == 0, res.output
    return [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]


@pytest.mark.slow
@pytest.mark.ray
def test_two_ray_workers_give_what_one_engine_gives(tmp_path):
    f = str(prompts_file(tmp_path))
    common = ["--prompts-file", f, "-n", "16", "-K", "10", "--prefetch", "stream"]
    local = run_json(*common)
    remote = run_json(*common, "--workers", "2")
    assert [r["prompt"] for r in remote] == PROMPTS  # in prompt order
    assert [r["tokens"] for r in remote] == [r["tokens"] for r in local]
    assert [r["transitions"] for r in remote] == [10] * len(PROMPTS)


@pytest.mark.slow
@pytest.mark.ray
def test_a_worker_killed_mid_run_loses_no_prompt():
    from presto_tui.runtime.engines.registry import EngineOptions
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.cluster import Cluster, WorkerLost
    from presto_tui.runtime.session.events import RoundDone, SessionEnd, SessionError
    from presto_tui.runtime.session.runner import run_session

    params = SamplerParams(prefetch="spine", max_new_tokens=48, steps=60, budget=4)
    with Cluster(2, "synthetic", EngineOptions(), concurrency=1) as cluster:
        cores = [set(info["cores"]) for info in ray.get([w.info.remote() for w in cluster.workers])]
        if len(os.sched_getaffinity(0)) >= 2:  # each CPU worker on cores of its own
            assert all(cores) and not cores[0] & cores[1]
        ends: dict[int, tuple] = {}
        lost, errors, killed = [], [], False
        for i, ev in cluster.run(PROMPTS, params):
            if isinstance(ev, RoundDone) and not killed:
                ray.kill(cluster.workers[0])  # mid-run: some prompts have started, none has finished
                killed = True
            elif isinstance(ev, WorkerLost):
                lost.append(ev)
            elif isinstance(ev, SessionError):
                errors.append(i)
            elif isinstance(ev, SessionEnd):
                ends[i] = ev.tokens
    assert len(lost) == 1 and lost[0].worker == 0 and lost[0].prompts
    assert set(errors) <= set(lost[0].prompts)  # only sessions the dead worker had open end in error
    assert sorted(ends) == list(range(len(PROMPTS)))  # every prompt finished, on the surviving worker
    local = SyntheticEngine()
    for i, p in enumerate(PROMPTS):  # and finished as it would have on any engine
        (end,) = [ev for ev in run_session(local, params, local.encode_prompt(p)) if isinstance(ev, SessionEnd)]
        assert ends[i] == end.tokens


@pytest.mark.slow
@pytest.mark.ray
def test_ctrl_c_stops_every_worker_and_keeps_finished_sessions(tmp_path):
    trace = tmp_path / "int.jsonl"
    many = tmp_path / "many.txt"
    many.write_text("\n".join(PROMPTS * 8) + "\n")
    proc = subprocess.Popen(
        presto_command("run", "--prompts-file", str(many), "--backend", "synthetic", "-n", "64", "-K", "40",
                       "-N", "2", "-C", "1", "--workers", "2", "--trace", str(trace), "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # One chain at a time on each worker (-C 1), so a session ends long before the last: at the default
        # concurrency every session runs at once and all of them end together, at the very end. Short
        # sessions, many of them: the first ends soon even on a loaded machine (at K = 300 none had
        # ended after 120 s in a full suite run), the last long after.
        # The wait includes Ray's start and two workers' (alone the first session ends at about 12 s, in
        # a full suite run within 60 s), hence the wider guard; a run that exits early fails at once,
        # with its own error (that is how a Ray start starved beside vLLM's workers showed itself).
        def ended() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the run exited ({proc.returncode}) before a session ended: {proc.stderr.read()}")
            return trace.exists() and '"session_end"' in trace.read_text()

        wait_for(ended, "a finished session", timeout=300, every=0.2)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    t = read_trace(trace)
    done = [s for s in t.sessions if s.summary().status == "done"]
    assert done and all(s.ended for s in t.sessions)  # finished ones kept, open ones ended
    assert all(s.summary().status in ("done", "cancelled") for s in t.sessions)
    assert len(out.splitlines()) <= len(done)


@pytest.mark.parametrize("args,needle", [
    (["--workers", "0"], "--workers must lie in [1, 4096]"),
    (["--workers", "100000"], "--workers must lie in"),
    pytest.param(["--workers", "64"], "more than the cluster's", marks=pytest.mark.ray),  # (asks a started Ray)
    (["--ray-address", "127.0.0.1:1"], "cannot reach it"),
    (["--ray-address", "nonsense"], "must be host:port"),
])
def test_bad_scale_out_input_is_one_line_before_any_engine(args, needle):
    res = runner.invoke(app, ["run", "x", "--no-trace", *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("20")]  # Ray's own log
    assert lines[-1].startswith("presto-tui: error:") and needle in lines[-1]


def test_ray_missing_is_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    res = runner.invoke(app, ["run", "x", "--no-trace", "--workers", "2"])
    assert res.exit_code == 2 and "pip install 'presto-tui[ray]'" in res.stderr


@pytest.mark.engine
@pytest.mark.ray
def test_ray_worker_runs_the_embedded_model_like_the_local_engine(tmp_path, vllm):
    from presto_tui import sample

    prompt = "Name a prime number."
    f = tmp_path / "p.txt"
    f.write_text(prompt + "\n")
    remote = run_json("--prompts-file", str(f), "-n", "12", "-K", "4", "--backend", "vllm", "--max-model-len", "256",
                      "--workers", "1")
    (local,) = sample(vllm, prompt, {"max_new_tokens": 12, "steps": 4})  # the library, on this process's engine
    assert remote[0]["tokens"] == list(local.tokens)


@pytest.mark.engine
def test_vllm_tensor_parallel_2_on_cpu_keeps_records_and_exactness():
    """Two vLLM CPU workers (a tiny Llama with 4 heads, split in two) under a multiprocess engine core
    (VLLM_ENABLE_V1_MULTIPROCESSING=1: the core and the logits processor in a process of their own,
    the workers in two more): the records of every token come back through collective_rpc, spine and
    stream end where sequential does, and nothing is left behind in the workers. (One engine start
    checks both ways of running vLLM in other processes.)"""
    script = Path(__file__).parent.parent / "scripts" / "check_parallel.py"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    proc = subprocess.run([sys.executable, str(script), "--tp", "2"], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "engine core: SyncMPClient" in proc.stdout
    assert "stream  same state as sequential" in proc.stdout and "records left in the workers: 0" in proc.stdout


def test_a_head_slow_to_answer_is_asked_again_before_its_error_stands(monkeypatch):
    """On a busy machine Ray's state client can give up on a head it has just started ("Failed to
    connect to GCS"): the cluster asks again, and only after its patience is it one engine-failure line."""
    from types import SimpleNamespace

    from presto_tui.errors import EngineError
    from presto_tui.runtime.session import cluster

    monkeypatch.setattr(cluster.time, "sleep", lambda s: None)
    answers = [ray.exceptions.RaySystemError("Failed to connect to GCS"), {"CPU": 2.0}]

    def resources():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    fake = SimpleNamespace(cluster_resources=resources, exceptions=ray.exceptions)
    assert cluster.cluster_resources(fake) == {"CPU": 2.0} and not answers
    answers[:] = [ray.exceptions.RaySystemError("Failed to connect to GCS")] * 2
    with pytest.raises(EngineError, match="did not answer within 0 s: .*Failed to connect to GCS"):
        cluster.cluster_resources(fake, patience_s=0)


def test_a_local_ray_start_that_times_out_is_tried_again_then_one_line():
    """Ray waits 30 s for a node it starts; a start that times out on a busy machine is tried once
    more, and a second failure is one engine-failure line, not an internal error."""
    from types import SimpleNamespace

    from presto_tui.errors import EngineError
    from presto_tui.runtime.session import cluster

    calls = []

    def init(**kw):
        calls.append(kw)
        if len(calls) in failing:
            raise Exception("The current node timed out during startup.")

    fake = SimpleNamespace(init=init, shutdown=lambda: None)
    failing = {1}
    cluster.start_local_ray(fake)
    assert len(calls) == 2 and calls[-1]["_node_ip_address"] == cluster.LOOPBACK
    calls.clear()
    failing = {1, 2}
    with pytest.raises(EngineError, match=r"could not start a local Ray instance \(2 tries\): The current node"):
        cluster.start_local_ray(fake)


def test_cpu_workers_sharing_a_node_get_disjoint_cores():
    from presto_tui.runtime.session.cluster import split_cores

    places = [("a", range(8)), ("b", [0, 1]), ("a", range(8)), ("a", range(8)), ("b", [0, 1])]
    cores = split_cores(places)
    assert cores[0] == (0, 1) and cores[2] == (2, 3) and cores[3] == (4, 5)  # 3 workers on 8 cores: 2 each
    assert cores[1] == (0,) and cores[4] == (1,)
    assert split_cores([("a", [0])] * 2) == [(0,), (0,)]  # more workers than cores: they share


@pytest.mark.parametrize("env,share,threads", [(None, 2, 2), ("1", 2, 1), ("8", 2, 2), ("", 3, 3), ("two", 2, 2),
                                               ("0", 2, 2)])
def test_a_ray_workers_threads_follow_omp_num_threads_as_a_local_engines_do(monkeypatch, env, share, threads):
    """Without --threads a worker takes its share of the cores, or fewer where OMP_NUM_THREADS says
    so (a busy machine; the tests' two workers on two cores): oversubscribed OpenMP threads spin."""
    from presto_tui.runtime.session.cluster import worker_threads

    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert worker_threads(share) == threads
