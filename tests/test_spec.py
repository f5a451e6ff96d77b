"""The parameter specification reaches every front-end: one entry per parameter, nothing hand-written.

Each test walks every entry of `SPEC` into one front-end (the commands' --help, the server's OpenAPI
schema and its validation, the client's request body, lm-eval's model arguments, the trace header,
`stats`' pooling), so a parameter added to the spec and missed anywhere fails here, and drift
between the commands cannot come back.  (The settings dialog's walk is in test_app.py.)
"""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from presto_tui.api.params import ENGINE_PARAMS, PARAMS, SAMPLER_PARAMS, SPEC, Group, ParamError, Params, params_from
from presto_tui.cli import app
from presto_tui.runtime.core.language import describe
from presto_tui.runtime.core.spec import applying, comparable_names

COMMANDS = {  # command -> the groups it declares (cli/params.py takes)
    "run": {Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
    "chat": {Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
    "serve": {Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
    "bench": {Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
    "eval": {Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
    "lm-eval": {Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE},
}
# what a command leaves out on purpose (its own option replaces it)
REPLACED = {"bench": {"seed", "sampler", "prefetch", "budget"},  # --seeds, --samplers, --rules, --budgets
            "eval": {"sampler", "prefetch"}, "lm-eval": {"sampler", "prefetch"}}  # --methods
# Flags a command describes in a sentence of its own: eval's and lm-eval's --seed is the methods' seed, from which
# each item's (each request's) session seed is derived, not one session's seed as the spec says.
OWN_HELP = {"eval": {"seed"}, "lm-eval": {"seed"}}


def help_of(command: str) -> str:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_parameter_of_a_commands_groups_is_one_of_its_options(command):
    text = help_of(command)
    for p in SPEC:
        if not p.cli_flag or p.group not in COMMANDS[command] or p.name in REPLACED.get(command, set()):
            continue
        assert f"{p.cli_flag} " in text, f"{command} --help lacks {p.cli_flag}"
        if p.name in OWN_HELP.get(command, set()):
            continue
        words = p.help.split()[:3]
        assert " ".join(words) in " ".join(text.split()), f"{command}: {p.cli_flag}'s help is not the spec's"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_shared_options_are_the_same_on_every_command(command):
    """--chains reached every command that runs chains (lm-eval lacked it), --synthetic-cost every command
    that starts an engine (serve and lm-eval lacked it)."""
    text = help_of(command)
    for flag in ("--chains", "--synthetic-cost", "--classifier"):
        assert f"{flag} " in text, f"{command} --help lacks {flag}"


def test_every_sampler_parameter_is_a_field_of_SamplerParams_and_every_engine_one_of_EngineOptions():
    from dataclasses import fields

    from presto_tui.api.engine import EngineOptions

    own = {name for name, _ in Params().own}
    assert {f.name for f in fields(Params) if f.name != "own"} | own == {p.name for p in SAMPLER_PARAMS}
    assert {f.name for f in fields(EngineOptions)} == {p.name for p in ENGINE_PARAMS}
    for p in SAMPLER_PARAMS:  # one owner of the default: the spec (prefetch and budget: by rule)
        if p.name not in ("prefetch", "budget"):
            assert getattr(Params(), p.name) == p.default, p.name
    for p in ENGINE_PARAMS:
        assert getattr(EngineOptions(), p.name) == p.default, p.name


def test_every_sampler_parameter_is_a_request_field_in_the_servers_openapi_schema():
    from fastapi.testclient import TestClient

    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.serve.app import ServeConfig, Server, create_app

    with TestClient(create_app(Server(SyntheticEngine(), ServeConfig()))) as client:
        schema = client.get("/openapi.json").json()
    for path in ("/v1/completions", "/v1/chat/completions"):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        for p in SAMPLER_PARAMS:
            if not p.request_field:
                continue
            prop = body["properties"][p.request_field]
            assert p.help.split(".")[0][:30] in prop["description"], p.name
            if p.choice_names is not None and p.reader is None:
                assert prop["enum"] == list(p.choice_names)
            if p.limit is not None and p.reader is None:
                assert prop.get("maximum", float("inf")) == pytest.approx(p.limit.hi) or p.limit.hi == float("inf")


def good_value(p):
    """A value of `p` other than its default that a session with the defaults accepts."""
    if p.choice_names is not None:
        return next(c for c in p.choice_names if c != p.default)
    if p.name == "budget":
        return "fill:3"
    if p.name == "speculate":
        return "none"
    if p.name == "pt_ladder":
        return "1,2,4"
    if p.name == "pt_warmup":
        return 8  # (two swap barriers at least, and transitions left after it)
    if p.kind is int:
        return 32 if p.name in ("max_new_tokens", "block_size") else int(p.limit.lo) + 2
    if p.kind is float:
        return p.limit.hi / 2 if p.limit.hi < 100 else 2.5
    return not p.default if isinstance(p.default, bool) else True


WITH = {"inputs": {"prefetch": "bfs"},  # node inputs need a rule that takes them
        "pt_warmup": {"pt_ladder": "auto"}}  # a warm-up is an adaptive ladder's


def bad_value(p):
    if p.choice_names is not None:
        return "no-such-choice"
    if p.name == "budget":
        return "fill:x"
    if p.name == "speculate":
        return "everything"
    if p.name == "pt_ladder":
        return "1,x"
    return -10**6 if p.kind in (int, float) else "maybe"


@pytest.mark.parametrize("p", [p for p in SAMPLER_PARAMS if p.request_field], ids=lambda p: p.name)
def test_every_sampler_field_is_read_and_refused_on_the_one_path_named_as_the_request_names_it(p):
    from presto_tui.serve.protocol import COMPLETION, FieldError, parse

    # (a method's own field is its method's: another method's is refused as an unknown field)
    extra = {**({"sampler": sorted(p.samplers)[0]} if p.samplers else {}), **WITH.get(p.name, {})}
    ask = parse({"prompt": "x", p.request_field: good_value(p), **extra}, COMPLETION, {})
    assert ask.params == params_from({p.name: good_value(p), **extra})
    with pytest.raises(FieldError) as e:
        parse({"prompt": "x", p.request_field: bad_value(p)}, COMPLETION, {})
    assert e.value.field == p.request_field
    assert p.request_field in str(e.value) and p.cli_flag not in str(e.value), str(e.value)
    with pytest.raises(ParamError) as cli:  # the command line says the same, naming its flag
        params_from({p.name: bad_value(p)})
    assert str(cli.value) == str(e.value).replace(p.request_field, p.cli_flag, 1)


def test_the_client_sends_every_sampler_parameter_and_the_server_reads_back_the_same_params():
    from presto_tui.serve.client import body_for
    from presto_tui.serve.protocol import CHAT, parse

    params = Params(sampler="entropycut", prefetch="spine", budget=5, alpha=3.0, tau=0.4, max_new_tokens=32,
                    block_size=16, steps=7, epsilon=0.05, seed=11, beta=2.0, cut_mix=0.2, samples=3,
                    bon_rank="logp", particles=5, smc_block=8, smc_ramp=9, tries=2, speculate="none").validate()
    body = body_for("hi", [], params, "r1")
    others = [p for p in SAMPLER_PARAMS if p.samplers is not None and "entropycut" not in p.samplers]
    for p in SAMPLER_PARAMS:
        if p.request_field and getattr(params, p.name) is not None:
            assert (p.request_field in body) == (p not in others), p.name  # (another method's is refused)
    assert parse(body, CHAT, {}).params == params.with_(**{p.name: p.default for p in others})


def test_every_parameter_is_an_lm_eval_model_argument():
    pytest.importorskip("lm_eval")
    from presto_tui.lmeval.model import ARGS, _flags

    for p in (*SAMPLER_PARAMS, *ENGINE_PARAMS, PARAMS["backend"]):
        assert ARGS.get(p.name) == p.name
        if p.request_field:
            assert ARGS.get(p.request_field) == p.name  # rank=logp, as the server names it
    assert _flags({"rank": "logp", "max_tokens": 8}) == {"bon_rank": "logp", "max_new_tokens": 8}


def test_every_sampler_parameter_is_in_the_trace_header_of_a_run(tmp_path):
    from presto_tui.api.traces import read_trace

    trace = tmp_path / "t.jsonl"
    result = CliRunner().invoke(app, ["run", "x", "-n", "8", "-K", "2", "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    start = read_trace(trace).session(1).start
    assert set(start.params) >= {p.name for p in SAMPLER_PARAMS}


@pytest.mark.parametrize("p", [p for p in SAMPLER_PARAMS if p.name != "seed"], ids=lambda p: p.name)
def test_stats_pools_sessions_only_when_every_parameter_their_sampler_reads_agrees(p):
    """For each parameter: two sessions that differ in it alone are pooled only when their sampler does
    not read it (stats' comparable key comes from the spec's `applies`)."""
    from presto_tui.logs.stats import comparable

    for sampler in ("powermh", "entropycut", "multitry", "lowtemp", "bestofn", "powersmc"):
        for rule in (("stream", "spine") if sampler in ("powermh", "entropycut", "multitry") else ("none",)):
            a = Params(sampler=sampler, prefetch=rule, max_new_tokens=32)
            value = good_value(p)
            try:
                b = params_from({**{k: v for k, v in a.__dict__.items() if v is not None}, p.name: value})
            except ParamError:
                continue  # the value does not combine with this sampler (a baseline has no rule)
            differ = a.to_dict()[p.name] != b.to_dict()[p.name]
            split = comparable(a.to_dict(), "synthetic", "m") != comparable(b.to_dict(), "synthetic", "m")
            reads = p.name in applying(a.to_dict()) or p.name in applying(b.to_dict())
            assert split == (differ and reads), (sampler, rule, p.name)


def test_a_methods_own_parameters_tell_its_sessions_apart_in_its_description():
    """`describe` (the one description `run`, the app, `stats` and the frontier use) names every own
    parameter of a method whose value differs: sessions of different settings never read alike."""
    for p in SPEC:
        if p.group is Group.OWN:
            for sampler in p.samplers:
                base = Params(sampler=sampler)
                d = base.to_dict()
                assert p.name in comparable_names(d)
                value = getattr(base, p.name)
                other = (not value if isinstance(value, bool) else p.choice_names[-1] if p.choice_names and
                         value != p.choice_names[-1] else p.choice_names[0] if p.choice_names else
                         good_value(p) if p.reader is not None else (value or 0) + (3 if p.kind is int else 0.5))
                try:
                    changed = base.with_(**{p.name: other}).validate()
                except ParamError:
                    continue  # (a value that does not go with the defaults: another test's business)
                assert describe(changed) != describe(base), (sampler, p.name)


def test_a_range_reads_the_same_from_a_flag_a_field_and_the_settings_dialog():
    """One message per fault, the parameter named as each front-end names it."""
    from presto_tui.api.params import flag, label

    with pytest.raises(ParamError) as e:
        params_from({"alpha": "1e309"})
    assert str(e.value) == "--alpha must be a finite number in (0, 1000], got '1e309'"  # what was typed, not inf
    assert str(e.value.named(label)) == "alpha must be a finite number in (0, 1000], got '1e309'"
    assert e.value.named(flag) is not None and e.value.param == "alpha"


def test_engine_options_are_refused_by_a_backend_that_does_not_take_them():
    """Each backend declares the options it takes; none slips through to a backend that ignores it."""
    from presto_tui.api.engine import engine_options
    from presto_tui.api.params import BackendName

    for backend in BackendName:
        for p in ENGINE_PARAMS:
            value = good_value(p) if p.name != "model" else "smollm2-135m"
            if p.name in backend.flags:
                if p.name == "model":
                    continue  # (a real model is checked in test_engines.py)
                engine_options({"backend": backend.value, p.name: value})
            else:
                with pytest.raises(ParamError, match=f"{p.cli_flag} does not apply to --backend {backend.value}"):
                    engine_options({"backend": backend.value, p.name: value})


@pytest.mark.usefixtures("in_tmp")
def test_a_hub_id_is_found_in_a_local_hugging_face_cache(tmp_path, monkeypatch):
    """The cache layout huggingface_hub writes: models--ORG--NAME/{refs/main, snapshots/REV/...}."""
    from presto_tui.api.engine import engine_options
    from presto_tui.runtime.engines.models import check_model, resolve

    hub = tmp_path / "hf" / "hub"
    repo = hub / "models--Qwen--Qwen3-8B"
    rev = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(rev)
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check_model("Qwen/Qwen3-8B")
    assert resolve("Qwen/Qwen3-8B") == snap
    assert engine_options({"backend": "transformers", "model": "Qwen/Qwen3-8B"})[1].model == "Qwen/Qwen3-8B"


@pytest.mark.usefixtures("in_tmp")
def test_an_uncached_hub_id_offline_is_one_line_naming_the_id_and_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(app, ["run", "x", "--backend", "transformers", "--model", "Qwen/Qwen3-8B"],
                                env={**os.environ, "PRESTO_TUI_BACKEND": "transformers"})
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert line == (f"presto-tui: error: Qwen/Qwen3-8B: not in the Hugging Face cache {tmp_path / 'hf' / 'hub'} "
                    "and not downloaded (HF_HUB_OFFLINE is set)")


def test_parameters_found_valid_are_not_checked_again_until_a_method_is_registered(monkeypatch):
    """A population's members were validated by its method's check and again by each member's driver (28% of a
    tempering session's time on the enumerable model): valid parameters are remembered but for their seed, per
    naming, until the registry changes; bad ones, a bad seed too, are refused every time."""
    from presto_tui.runtime.core import params as core_params
    from presto_tui.runtime.core import registry
    from presto_tui.runtime.core.params import SamplerParams

    checked = []
    original = SamplerParams._check
    monkeypatch.setattr(SamplerParams, "_check", lambda self, naming: (checked.append(self), original(self, naming)))
    monkeypatch.setattr(core_params, "_VALID", {})
    p = SamplerParams(sampler="ppt", pt_replicas=3, alpha=4.0, max_new_tokens=4, seed=11)
    p.validate()
    members = len(checked)
    assert members == 4  # the session's, then its three members' (the method's check)
    SamplerParams(sampler="ppt", pt_replicas=3, alpha=4.0, max_new_tokens=4, seed=11).validate()  # an equal one
    p.method.members(p)[1].validate()  # a member, as its driver validates it
    p.with_(seed=12).validate()  # another session: the checks read the seed only for its range
    assert len(checked) == members
    with pytest.raises(ParamError, match="seed"):  # ... which is checked every time
        p.with_(seed=-1).validate()
    p.validate(lambda name: name)  # another naming: its errors would read otherwise
    assert len(checked) == members + 1 + 3
    monkeypatch.setattr(registry, "generation", registry.generation + 1)  # a method registered since
    p.validate()
    assert len(checked) == 2 * members + 4
    bad = SamplerParams(sampler="ppt", pt_replicas=3, alpha=4.0, max_new_tokens=4, pt_alpha_min=9.0)
    for _ in range(2):
        with pytest.raises(ParamError, match="pt-alpha-min"):
            bad.validate()
