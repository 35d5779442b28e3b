"""The trainer adapters against the trainers' own packages from PyPI (issue 22): TRL's tool
schema extraction and its environment contract, SkyRL's ``skyrl_gym.make``, verl's
``initialize_tools_from_config`` and ``BaseTool``; each scores a bundled task's reference
solution 1.0 and an empty trajectory 0.

They run in their own virtual environment (``make test`` makes target/trainers-venv and runs
this file with it); elsewhere a missing package skips loudly, and fails under
``ENVCRAFT_TEST_REQUIRE=all``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import envcraft
from conftest import REPO, envcraft_binary, require, serve_available

WORKSPACES = REPO / "workspaces"
SKILLS = REPO / "skills"
# A single-turn task with a manifest verifier, a two-turn one, and one of another environment
# (another skill, so other tools).
TASKS = ["example/extract-todos", "example/archive-read-mail", "email-triage/spam-filter"]


def need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a package whose own imports fail here
        require(False, f"{module} cannot be imported here ({type(e).__name__}: {e}); make test installs it into target/trainers-venv")


def solution(task: str) -> List[Dict[str, Any]]:
    env, tid = task.split("/")
    path = WORKSPACES / env / "tasks" / tid / "solution.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cli_tools(binary: Path, task: str) -> List[Dict[str, Any]]:
    out = subprocess.run(
        [str(binary), "tools", task, "--format", "openai", "--workspaces", str(WORKSPACES), "--skills", str(SKILLS)],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return list(json.loads(out.stdout))


@pytest.fixture(scope="module")
def binary() -> Path:
    found = envcraft_binary()
    why = serve_available(found)
    require(why is None, why or "")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def local(binary: Path) -> Iterator[envcraft.Client]:
    with envcraft.Client.local(binary, workspaces=WORKSPACES, skills=SKILLS) as client:
        yield client


# -- TRL ------------------------------------------------------------------------------------


def test_trl_schemas_are_envcraft_tools(binary: Path, local: envcraft.Client) -> None:
    """``transformers.utils.get_json_schema`` (what TRL renders into the prompt) on every tool
    method gives ``envcraft tools``'s schema, less only the keywords it cannot write."""
    need("trl")
    from transformers.utils import get_json_schema

    from envcraft import trl as envcraft_trl
    from envcraft._tool_methods import UNEXPRESSED, comparable

    for task in (TASKS[0], TASKS[2]):
        env_class = envcraft_trl.environment_factory(task=task, client=local)
        expected = cli_tools(binary, task)
        instance = env_class()
        # What TRL takes as tools: the class's public functions but reset and get_reward.
        members = inspect.getmembers(env_class, predicate=inspect.isfunction)
        methods = sorted(n for n, _ in members if not n.startswith("_") and n not in ("reset", "get_reward"))
        assert methods == sorted(t["function"]["name"] for t in expected)
        for tool in expected:
            want = tool["function"]
            got = get_json_schema(getattr(instance, want["name"]))
            assert got["type"] == "function"
            got_fn = got["function"]
            assert got_fn["name"] == want["name"]
            assert got_fn["description"] == want["description"], want["name"]
            assert comparable(got_fn["parameters"]) == comparable(want["parameters"]), want["name"]
            for arg, prop in got_fn["parameters"]["properties"].items():
                lost = set(want["parameters"]["properties"][arg]) - set(prop)
                assert lost <= set(UNEXPRESSED), f"{want['name']}.{arg} lost {lost}"


@pytest.mark.parametrize("task", TASKS)
def test_trl_reference_solution_scores_1_and_empty_0(local: envcraft.Client, task: str) -> None:
    need("trl")
    from envcraft import trl as envcraft_trl

    env_class = envcraft_trl.environment_factory(task=task, client=local)
    env = env_class()
    prompt = env.reset(task=task, seed=11, prompt=[{"role": "user", "content": ""}])
    assert isinstance(prompt, str) and prompt
    for step in solution(task):
        out = json.loads(getattr(env, step["tool"])(**step["args"]))
        assert out["ok"], (step, out)
    assert env.get_reward() == 1.0
    assert env.get_reward() == 1.0  # asked again: the same, no second verify

    env.reset(task=task)
    assert env.get_reward() == 0.0


def test_trl_multi_turn_prompt_and_row_defaults(local: envcraft.Client) -> None:
    need("trl")
    from envcraft import trl as envcraft_trl

    env_class = envcraft_trl.environment_factory(task=TASKS[1], client=local, with_docs=True)
    env = env_class()
    prompt = env.reset()  # no task in the row: the factory's
    assert "Which of the emails" in prompt and "archive" in prompt.split("Which of the emails")[1]
    assert prompt.index("Which of the emails") > 0  # the docs come first
    out = json.loads(env.read(path="no/such/file"))
    assert out["ok"] is False and out["error"]["category"]  # a failed call is a result
    env.get_reward()


def test_trl_refuses_a_row_with_other_tools_and_multi_environment_mode_splits_them(local: envcraft.Client) -> None:
    need("trl")
    from envcraft import trl as envcraft_trl

    env_class = envcraft_trl.environment_factory(task=TASKS[0], client=local)
    with pytest.raises(ValueError, match="other tools"):
        env_class().reset(task=TASKS[2])
    classes = envcraft_trl.environment_factories(client=local, envs=["example", "email-triage"])
    assert set(classes) == {"example", "email-triage"}
    env = classes["email-triage"]()
    env.reset(task=TASKS[2])
    for step in solution(TASKS[2]):
        assert json.loads(getattr(env, step["tool"])(**step["args"]))["ok"]
    assert env.get_reward() == 1.0
    with pytest.raises(ValueError, match="no task of the environments"):
        envcraft_trl.environment_factories(client=local, envs=["nope"])


def test_trl_pooled_instances_share_one_client_connection(local: envcraft.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL keeps a pool of instances and resets them: all share the class's client, and calls
    made one after the other go over one kept-alive connection."""
    need("trl")
    from envcraft import trl as envcraft_trl

    client = envcraft.Client(local.url)
    env_class = envcraft_trl.environment_factory(task=TASKS[0], client=client)
    pool = [env_class() for _ in range(4)]
    assert all(e.client is client for e in pool)
    client.close()  # no idle connection: every connection from here on is counted
    connects: List[int] = []
    real = envcraft.Client._connect

    def counting(self: envcraft.Client, where: str) -> Any:
        connects.append(1)
        return real(self, where)

    monkeypatch.setattr(envcraft.Client, "_connect", counting)
    for round_ in range(2):
        for env in pool:
            env.reset(task=TASKS[0], seed=round_)
            env.ls(path="inbox")
            env.get_reward()
    client.close()
    assert len(connects) == 1, f"{len(connects)} connections for 24 sequential requests"


# -- SkyRL ----------------------------------------------------------------------------------


def hermes(step: Dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": step["tool"], "arguments": step["args"]}) + "\n</tool_call>"


def openai_style(steps: List[Dict[str, Any]]) -> str:
    return json.dumps({"tool_calls": [
        {"type": "function", "function": {"name": s["tool"], "arguments": json.dumps(s["args"])}} for s in steps
    ]})


def skyrl_episode(local: envcraft.Client, task: str, actions: List[str], **extras: Any) -> Dict[str, Any]:
    skyrl_gym = need("skyrl_gym")
    import envcraft.skyrl  # noqa: F401  (registers "envcraft")

    env = skyrl_gym.make("envcraft", env_config={"url": local.url}, extras={"task": task, **extras})
    conversation, meta = env.init([{"role": "user", "content": ""}])
    assert conversation[0]["role"] == "system" and "<tools>" in conversation[0]["content"]
    assert conversation[-1]["role"] == "user" and conversation[-1]["content"]
    outs = []
    for action in actions:
        out = env.step(action)
        outs.append(out)
        if out["done"]:
            break
    metrics = env.get_metrics()
    env.close()
    return {"outs": outs, "meta": meta, "metrics": metrics, "first": conversation}


def test_skyrl_reference_solution_scores_1(local: envcraft.Client) -> None:
    task = TASKS[1]  # two turns: the answer after the first moves to the second prompt
    steps = solution(task)
    turn0 = [s for s in steps if s.get("turn", 0) == 0]
    turn1 = [s for s in steps if s.get("turn", 0) == 1]
    actions = [hermes(s) for s in turn0] + ["Emails 1 and 3 are read."] + [openai_style(turn1)] + ["Done."]
    ep = skyrl_episode(local, task, actions, seed=5)
    outs = ep["outs"]
    assert [o["done"] for o in outs] == [False] * (len(actions) - 1) + [True]
    for o in outs[: len(turn0)]:
        [obs] = o["observations"]
        assert obs["role"] == "user" and obs["content"].count("<tool_response>") == 1
        assert json.loads(obs["content"].split("\n")[1])["ok"]
    assert "archive" in outs[len(turn0)]["observations"][0]["content"]  # the second prompt
    assert outs[len(turn0) + 1]["observations"][0]["content"].count("<tool_response>") == len(turn1)
    assert [o["reward"] for o in outs[:-1]] == [0.0] * (len(outs) - 1)
    assert outs[-1]["reward"] == 1.0
    assert ep["metrics"]["tool_calls"] == len(steps) and ep["metrics"]["failed_tool_calls"] == 0


def test_skyrl_empty_episode_scores_0_and_max_turns_ends_it(local: envcraft.Client) -> None:
    ep = skyrl_episode(local, TASKS[0], ["I will not do it."])
    assert ep["outs"][-1]["done"] and ep["outs"][-1]["reward"] == 0.0
    looping = [hermes({"tool": "ls", "args": {"path": "inbox"}})] * 5
    ep = skyrl_episode(local, TASKS[0], looping, max_turns=3)
    assert [o["done"] for o in ep["outs"]] == [False, False, True]
    assert ep["outs"][-1]["reward"] == 0.0


def test_skyrl_bad_calls_are_observations(local: envcraft.Client) -> None:
    bad = "<tool_call>{not json}</tool_call>"
    unknown = hermes({"tool": "teleport", "args": {}})
    ep = skyrl_episode(local, TASKS[0], [bad, unknown, "stop"])
    first, second = (json.loads(o["observations"][0]["content"].split("\n")[1]) for o in ep["outs"][:2])
    assert first["ok"] is False and "not JSON" in first["error"]["message"]
    assert second["ok"] is False
    assert ep["metrics"]["failed_tool_calls"] == 2


def test_skyrl_needs_a_task(local: envcraft.Client) -> None:
    skyrl_gym = need("skyrl_gym")
    import envcraft.skyrl  # noqa: F401

    with pytest.raises(ValueError, match="extras\\['task'\\]"):
        skyrl_gym.make("envcraft", env_config={"url": local.url}, extras={})


# -- verl -----------------------------------------------------------------------------------


def test_verl_tool_config_loads_and_round_trips(local: envcraft.Client, tmp_path: Path, binary: Path) -> None:
    need("verl")
    import asyncio

    import yaml
    from verl.experimental.agent_loop.tool_agent_loop import AgentData
    from verl.tools.tool_registry import initialize_tools_from_config

    from envcraft import verl as envcraft_verl

    # The example YAML as shipped (a name per tool, the schema looked up), pointed at this server.
    shipped = yaml.safe_load((REPO / "clients" / "python" / "examples" / "verl_tools.yaml").read_text())
    for entry in shipped["tools"]:
        entry["config"]["url"] = local.url
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(shipped))
    tools = {t.name: t for t in initialize_tools_from_config(str(path))}
    task = shipped["tools"][0]["config"]["task"]
    expected = {t["function"]["name"]: t for t in cli_tools(binary, task)}
    assert set(tools) == set(expected)
    for name, tool in tools.items():
        assert isinstance(tool, envcraft_verl.EnvcraftTool)
        # What ToolAgentLoop renders into the prompt: every keyword kept.
        assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) == expected[name], name

    async def trajectory(steps: List[Dict[str, Any]], request_id: str) -> float:
        agent_data = AgentData(
            messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs={},
            metrics={}, request_id=request_id, tools_kwargs={},
        )
        for step in steps:  # as ToolAgentLoop._call_tool does it: create, execute, release
            tool = tools[step["tool"]]
            instance, _ = await tool.create(create_kwargs={"task": task, "seed": 3})
            response, tool_reward, metrics = await tool.execute(instance, step["args"], agent_data=agent_data)
            assert json.loads(response.text)["ok"], (step, response.text)
            assert metrics == {"ok": True} and tool_reward == 0.0
            await tool.release(instance)
        instance, _ = await tools["read"].create(create_kwargs={"task": task})
        reward = await tools["read"].calc_reward(instance, agent_data=agent_data)
        await tools["read"].release(instance)
        assert envcraft_verl.finish_trajectory(request_id) == reward
        return reward

    assert asyncio.run(trajectory(solution(task), "req-solution")) == 1.0
    assert asyncio.run(trajectory([{"tool": "ls", "args": {"path": "inbox"}}], "req-empty")) == 0.0
    assert envcraft_verl.finish_trajectory("req-solution") == 0.0  # closed: nothing left under that id


def test_verl_idle_trajectory_is_closed_by_a_later_create(local: envcraft.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trajectory's session unused for ``trajectory_idle_seconds`` is closed by a later tool
    call's ``create`` (looked for at most once per ``IDLE_SWEEP_INTERVAL``, not at every call);
    instance ids verl does not give are unique."""
    need("verl")
    import asyncio
    import time

    from envcraft import verl as envcraft_verl

    monkeypatch.setattr(envcraft_verl, "IDLE_SWEEP_INTERVAL", 0.2)
    monkeypatch.setattr(envcraft_verl.TRAJECTORIES, "_next_sweep", 0.0)  # not the last test's claim
    tool = envcraft_verl.EnvcraftTool({"type": "native", "tool": "ls", "task": TASKS[0], "url": local.url, "trajectory_idle_seconds": 0.3})

    class AgentData:
        request_id = "req-idle"

    async def one_call() -> str:
        instance, _ = await tool.create(create_kwargs={})
        response, _, _ = await tool.execute(instance, {"path": "inbox"}, agent_data=AgentData())
        await tool.release(instance)
        return str(instance)

    before = local.ready()["sessions"]
    ids = {asyncio.run(one_call()) for _ in range(3)}
    assert len(ids) == 3
    session = envcraft_verl.TRAJECTORIES.get("req-idle")
    assert session is not None and local.ready()["sessions"] == before + 1
    time.sleep(0.5)
    asyncio.run(tool.create())  # another trajectory's call: the idle one is closed
    assert envcraft_verl.TRAJECTORIES.get("req-idle") is None
    assert local.ready()["sessions"] <= before  # (and any other test's trajectory idle as long)
    with pytest.raises(envcraft.SessionNotFound):
        local._send(envcraft._wire.call_tool(session.id, "ls", {}))


def test_result_text_is_json_dumps() -> None:
    """The adapters' tool result text (one C encoder made once) is ``json.dumps(result,
    ensure_ascii=False)``, byte for byte, and refuses what it refuses."""
    from envcraft._tool_methods import result_text

    samples: List[Any] = [
        {"ok": True, "entries": [{"name": "a.txt", "size": 3, "type": "file"}], "path": "inbox"},
        {"ok": False, "error": {"category": "not_found", "message": "no such file: «é» \u2028 😀 \x00 \\ \""}},
        {"n": [0, -1, 2.5, 1e300, -0.0, float("nan"), float("inf"), None, True], "o": {}, "l": []},
        {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
        "text", 3, None, [],
    ]
    for sample in samples:
        assert result_text(sample) == json.dumps(sample, ensure_ascii=False), sample
    with pytest.raises(TypeError):
        result_text({"x": object()})


# -- the examples, with the scripted model --------------------------------------------------


def scripted(task: str) -> List[Dict[str, Any]]:
    """The reference solution as a model's replies: one tool call each, then an answer."""
    return [{"tool_calls": [{"name": s["tool"], "arguments": s["args"]}]} for s in solution(task)] + [{"content": "Done."}]


def run_example(name: str, args: List[str], local: envcraft.Client, module: str) -> str:
    need(module)
    from scripted_model import ScriptedModel

    examples = REPO / "clients" / "python" / "examples"
    with ScriptedModel(scripted(TASKS[0])) as model:
        proc = subprocess.run(
            [sys.executable, str(examples / name), "--task", TASKS[0], "--envcraft-url", local.url,
             "--base-url", model.url, "--model", model.model, *args],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "clients" / "python" / "src"), os.environ.get("PYTHONPATH", "")])},
        )
        assert not model.bad_requests, model.bad_requests
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_trl_example_on_cpu(local: envcraft.Client) -> None:
    out = run_example("trl_grpo.py", [], local, "trl")
    assert f"{TASKS[0]}: reward 1.000" in out, out


def test_skyrl_example_on_cpu(local: envcraft.Client) -> None:
    out = run_example("skyrl_episode.py", [], local, "skyrl_gym")
    assert f"{TASKS[0]}: reward 1.000" in out, out


def test_verl_example_on_cpu(local: envcraft.Client) -> None:
    out = run_example("verl_rollout.py", [], local, "verl")
    assert f"{TASKS[0]}: reward 1.000" in out, out


def byte_tokenizer() -> Any:
    """A tokenizer made here (no download): one token per byte, Qwen's special tokens, and the
    Qwen 2.5 chat template TRL ships, which renders tools and <tool_call> blocks."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    import trl

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                             "additional_special_tokens": ["<|im_start|>", "<tool_call>", "</tool_call>"]})
    fast.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    return fast


class ScriptedGeneration:
    """verl's LLM server client, answering each generate with the next scripted reply's tokens
    (no weights can be fetched here); records the prompts it was given."""

    def __init__(self, tokenizer: Any, replies: List[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = replies
        self.prompts: List[str] = []

    async def generate(self, request_id: str, prompt_ids: List[int], sampling_params: Dict[str, Any], **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False), stop_reason="completed")


@pytest.mark.parametrize("tools_from", ["session", "yaml"])
def test_verl_agent_loop_scores_with_the_verifier(local: envcraft.Client, tools_from: str, tmp_path: Path) -> None:
    """``envcraft_agent``: verl's own ToolAgentLoop (prompt tokens with the tools, Hermes
    parsing, tool responses as masked observation tokens) over one session, scored by verify."""
    need("verl")
    import hydra.utils
    import yaml
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.tools.tool_registry import initialize_tools_from_config

    from envcraft import verl as envcraft_verl

    [entry] = OmegaConf.load(REPO / "clients" / "python" / "examples" / "verl_agent_loop.yaml")
    assert hydra.utils.get_class(entry["_target_"]) is envcraft_verl.EnvcraftAgentLoop
    assert _agent_loop_registry["envcraft_agent"]["_target_"] == "envcraft.verl.EnvcraftAgentLoop"

    tools = None
    if tools_from == "yaml":
        shipped = yaml.safe_load((REPO / "clients" / "python" / "examples" / "verl_tools.yaml").read_text())
        for item in shipped["tools"]:
            item["config"]["url"] = local.url
        (tmp_path / "tools.yaml").write_text(yaml.safe_dump(shipped))
        tools = ToolListWrap(initialize_tools_from_config(str(tmp_path / "tools.yaml")))
    tokenizer = byte_tokenizer()
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": 200000, "response_length": 200000, "full_determinism": False,
        "multi_turn": {"max_user_turns": 30, "max_assistant_turns": 30, "max_parallel_calls": 1,
                       "max_tool_response_length": 100000, "tool_response_truncate_side": "middle",
                       "format": "hermes", "envcraft": {"url": local.url}},
    }}})
    task = TASKS[0]
    steps = solution(task)
    calls = ["<tool_call>\n" + json.dumps({"name": s["tool"], "arguments": s["args"]}) + "\n</tool_call><|im_end|>" for s in steps]
    open_before = local.ready()["sessions"]

    def trajectory(replies: List[str]) -> Any:
        generation = ScriptedGeneration(tokenizer, replies)
        loop = envcraft_verl.EnvcraftAgentLoop(
            trainer_config=DictConfigWrap(config), server_manager=generation, tokenizer=tokenizer, processor=None,
            dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})), hf_model_type="qwen2", tools=tools,
        )
        out = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, raw_prompt=[{"role": "user", "content": ""}],
                                                    extra_info={"task": task, "seed": 2}))
        return out, generation

    out, generation = trajectory(calls + ["Done.<|im_end|>"])
    assert out.reward_score == 1.0
    assert len(generation.prompts) == len(steps) + 1
    first = generation.prompts[0]
    assert "Please go through the emails" in first  # the task's prompt, the row having none
    assert '"name": "write"' in first and '"additionalProperties"' in first  # the tools, whole
    last = generation.prompts[-1]
    assert last.count("<tool_response>") == len(steps) and '"ok": true' in last and '"ok": false' not in last
    assert 0 < sum(out.response_mask) < len(out.response_mask)  # tool responses are masked out

    out, _ = trajectory(["I would rather not.<|im_end|>"])
    assert out.reward_score == 0.0
    assert local.ready()["sessions"] == open_before  # every trajectory's session was closed


# The distributions `import envcraft.verl` loads that verl does not declare (its requirements,
# with their extras, followed through), and those of them that the `verl` extra given as JSON
# (argv[2]) does not bring either.
UNDECLARED_SCRIPT = r"""
import importlib.metadata as md, json, sys
from packaging.requirements import Requirement
sys.path.insert(0, sys.argv[1])
before = {m.split(".")[0] for m in sys.modules}
import envcraft.verl
loaded = {m.split(".")[0] for m in sys.modules} - before
canon = lambda n: n.lower().replace("_", "-").replace(".", "-")
owners = md.packages_distributions()
site = md.distribution("verl").locate_file("")
# Installed as distributions of their own (not a copy inside another's directory: ray's colorama).
used = {canon(d) for m in loaded for d in owners.get(m, []) if md.distribution(d).locate_file("") == site} - {"envcraft"}
def closure(specs):
    declared = {}
    def follow(name, extras):
        key = canon(name)
        if key in declared and extras <= declared[key]:
            return
        declared[key] = declared.get(key, set()) | extras
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            return
        for r in reqs:
            req = Requirement(r)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (declared[key] or {""})):
                follow(req.name, set(req.extras))
    for spec in specs:
        req = Requirement(spec)
        follow(req.name, set(req.extras))
    return set(declared)
def required(dist):
    # Whether `import envcraft.verl` fails without it (transformers imports jmespath if it is there).
    blocked = [m for m, ds in owners.items() if dist in map(canon, ds)]
    code = "import sys; sys.modules.update(dict.fromkeys(%r)); sys.path.insert(0, %r); import envcraft.verl" % (blocked, sys.argv[1])
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0
import subprocess
print(json.dumps({"undeclared": sorted(used - closure(["verl"])),
                  "uncovered": sorted(d for d in used - closure(json.loads(sys.argv[2])) if required(d))}))
"""


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "clients/python/pyproject.toml"])
def test_verl_extra_brings_what_verl_imports_without_declaring(pyproject: str) -> None:
    """``pip install envcraft[verl]`` is enough for ``import envcraft.verl``: every distribution
    that import loads is verl's (its requirements followed through) or comes with the ``verl``
    extra, and the extra names nothing else (verl 0.9: cachetools, uvicorn, fastapi)."""
    need("verl")
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((REPO / pyproject).read_text())["project"]["optional-dependencies"]["verl"]
    proc = subprocess.run(
        [sys.executable, "-c", UNDECLARED_SCRIPT, str(REPO / "clients" / "python" / "src"), json.dumps(extra)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["uncovered"] == [], f"import envcraft.verl needs {found['uncovered']}, which envcraft[verl] does not bring"
    names = {Requirement(r).name.lower() for r in extra}
    assert "verl" in names and names - {"verl"} <= set(found["undeclared"]), (extra, found)


def test_trl_grpo_trainer_multi_environment(local: envcraft.Client, tmp_path: Path) -> None:
    """TRL's own GRPOTrainer, two steps on CPU, in its multi-environment mode
    (``environment_factories``): it probes the classes, renders their tools into the prompts,
    parses the model's <tool_call> blocks with its own parser, calls the tool methods and
    scores with ``get_reward``. The model is a one-layer Qwen2 made here whose generation a
    logits processor scripts (no weights can be fetched): the reference solution of one task,
    nothing for the other; the rewards TRL logs are 1.0 and 0."""
    need("trl")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from transformers import LogitsProcessor, LogitsProcessorList, Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from envcraft import trl as envcraft_trl

    tokenizer = byte_tokenizer()
    assistant = "<|im_start|>assistant\n"
    solved = ["<tool_call>\n" + json.dumps({"name": s["tool"], "arguments": s["args"]}) + "\n</tool_call>" for s in solution(TASKS[0])]
    solved.append("Done.")

    class Script(LogitsProcessor):  # type: ignore[misc]
        """The next token of the scripted reply: which reply by how many tool results the
        conversation holds, where in it by what the assistant wrote so far."""

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            for row in range(input_ids.shape[0]):
                text = tokenizer.decode(input_ids[row])
                replies = solved if "Please go through the emails in inbox/" in text else ["Nothing to do."]
                reply = replies[min(text.count("<tool_response>"), len(replies) - 1)]
                target = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
                written = len(tokenizer.encode(text.rsplit(assistant, 1)[1], add_special_tokens=False)) if assistant in text else 0
                scores[row] = torch.full_like(scores[row], -1e9)
                scores[row, target[min(written, len(target) - 1)]] = 0.0
            return scores

    class ScriptedQwen(Qwen2ForCausalLM):  # type: ignore[misc]
        def generate(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["logits_processor"] = LogitsProcessorList([Script()])
            return super().generate(*args, **kwargs)

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=65536,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    classes = envcraft_trl.environment_factories(client=local, envs=["example", "email-triage"])
    blank = [{"role": "user", "content": ""}]
    rows = [{"prompt": blank, "environment": "example", "task": TASKS[0]},
            {"prompt": blank, "environment": "email-triage", "task": TASKS[2]}]
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, num_generations=2, per_device_train_batch_size=2,
                      max_completion_length=8192, max_steps=2, logging_steps=1, report_to=[], save_strategy="no",
                      bf16=False, max_tool_calling_iterations=20, shuffle_dataset=False)
    open_before = local.ready()["sessions"]
    trainer = GRPOTrainer(model=ScriptedQwen(config), processing_class=tokenizer, args=args,
                          train_dataset=Dataset.from_list(rows), environment_factory=classes)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    by_env = {}
    for h in logged:
        for env in ("example", "email_triage"):
            mean = h.get(f"rewards/Envcraft_{env}/mean")
            if mean is not None:
                by_env[env] = (mean, h["tools/call_frequency"], h["tools/failure_frequency"])
    assert by_env["example"] == (1.0, float(len(solution(TASKS[0]))), 0.0), by_env
    assert by_env["email_triage"] == (0.0, 0.0, 0.0), by_env
    assert {k: len(v) for k, v in trainer._environment_pool.items()} == {"example": 2, "email-triage": 2}
    assert local.ready()["sessions"] == open_before  # get_reward closed every rollout's session
