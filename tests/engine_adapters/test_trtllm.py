"""The TensorRT-LLM adapter's parts that run without TensorRT-LLM: options, the mapping from
model.yaml to ``LLM`` and ``SamplingParams`` arguments, the tap-record-to-trace conversion
(on recorded tap data, tests/data/taps, see tools/trtllm/record_strict_calls.py), and the
clear failure when the package is missing. TensorRT-LLM itself never runs here."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from specseed.checks.context import CheckContext
from specseed.checks.rng_state import draw_ranges_disjoint, rng_contract
from specseed.core.errors import EngineUnavailable
from specseed.engine_adapters.base import EngineSettings, RequestPlan
from specseed.engine_adapters.contracts import get_contract
from specseed.engine_adapters.trtllm.config import (
    ConfigurationError,
    llm_spec,
    sampling_kwargs,
    tree_budget,
)
from specseed.engine_adapters.trtllm.observe import (
    UnattributableCalls,
    calls_from_json,
    calls_to_json,
    steps_from_tap,
    tap_observability,
)
from specseed.engine_adapters.trtllm.options import TrtllmOptions
from specseed.scenarios.loader import load_library_scenario
from specseed.taps.flashinfer_tap import TapCall
from specseed.traces.records import (
    EngineConfigRecord,
    RequestInfo,
    RunEnd,
    RunHeader,
    RunTrace,
)

TAPS = Path(__file__).parents[1] / "data" / "taps"
U63 = 1 << 63


def settings(**kw: object) -> EngineSettings:
    base = EngineSettings(
        name="trtllm",
        device="cuda",
        checkpoint=Path("/ckpt/target"),
        draft_checkpoint=Path("/ckpt/eagle3"),
        max_draft_len=3,
        max_num_requests=4,
        verification="strict",
        options=TrtllmOptions(),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def request(rid: str, seed: int | None, temperature: float = 1.0, **kw: object) -> RequestPlan:
    fields: dict[str, object] = {"prompt": (1, 2, 3), "top_k": 0, "top_p": 1.0, "max_tokens": 8}
    fields.update(kw)
    return RequestPlan(rid, seed=seed, temperature=temperature, **fields)  # type: ignore[arg-type]


# -- options and argument mapping ---------------------------------------------------------


def test_options_refuse_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ValidationError):
        TrtllmOptions(eagle3_layers=[1])  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        TrtllmOptions(speculative_method="medusa")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        TrtllmOptions(kv_cache_free_gpu_memory_fraction=0.0)


def test_eagle3_one_model_strict_maps_to_llm_arguments() -> None:
    options = TrtllmOptions(eagle3_layers_to_capture=(1, 5, 9))
    spec = llm_spec(settings(options=options, overlap_scheduler=True), options)
    assert spec.kwargs == {
        "model": "/ckpt/target",
        "max_batch_size": 4,
        "disable_overlap_scheduler": False,
        "skip_tokenizer_init": True,
    }
    assert spec.speculative is not None
    assert spec.speculative.config_class == "EagleDecodingConfig"
    assert spec.speculative.kwargs == {
        "max_draft_len": 3,
        "use_rejection_sampling": False,
        "speculative_model": "/ckpt/eagle3",
        "eagle3_one_model": True,
        "eagle3_layers_to_capture": {1, 5, 9},
    }
    assert spec.cuda_graphs is False
    assert spec.kv_cache == {"free_gpu_memory_fraction": 0.5}


def test_mtp_rejection_overlap_off_and_the_baseline_without_speculation() -> None:
    options = TrtllmOptions(speculative_method="mtp", max_seq_len=256)
    spec = llm_spec(settings(verification="rejection", draft_checkpoint=None), options)
    assert spec.kwargs["disable_overlap_scheduler"] is True
    assert spec.kwargs["max_seq_len"] == 256
    assert spec.speculative is not None and spec.speculative.config_class == "MTPDecodingConfig"
    assert spec.speculative.kwargs == {
        "max_draft_len": 3,
        "use_rejection_sampling": True,
        "num_nextn_predict_layers": 3,
    }
    assert llm_spec(settings(max_draft_len=0), TrtllmOptions()).speculative is None


def test_eagle3_trees_map_to_the_decoding_config() -> None:
    static = TrtllmOptions(max_total_draft_tokens=10, eagle_choices=((0,), (1,), (0, 0)))
    spec = llm_spec(settings(options=static), static)
    assert spec.speculative is not None
    assert spec.speculative.kwargs["max_total_draft_tokens"] == 10
    assert spec.speculative.kwargs["eagle_choices"] == [[0], [1], [0, 0]]
    assert "use_dynamic_tree" not in spec.speculative.kwargs
    assert tree_budget(settings(options=static), static) == 10
    dynamic = TrtllmOptions(
        max_total_draft_tokens=6, use_dynamic_tree=True, dynamic_tree_max_top_k=2
    )
    kwargs = llm_spec(settings(options=dynamic), dynamic).speculative.kwargs  # type: ignore[union-attr]
    assert (kwargs["use_dynamic_tree"], kwargs["dynamic_tree_max_topK"]) == (True, 2)
    assert "eagle_choices" not in kwargs
    # A linear chain: no tree fields, no budget for the layout.
    linear = llm_spec(settings(), TrtllmOptions()).speculative
    assert linear is not None and "max_total_draft_tokens" not in linear.kwargs
    assert tree_budget(settings(), TrtllmOptions()) is None
    assert tree_budget(settings(max_draft_len=0, options=static), static) is None
    with pytest.raises(ConfigurationError, match="below max_draft_len"):
        small = TrtllmOptions(max_total_draft_tokens=2, use_dynamic_tree=True)
        llm_spec(settings(options=small), small)


def test_tree_options_are_refused_where_they_mean_nothing() -> None:
    with pytest.raises(ValidationError, match="exclude each other"):
        TrtllmOptions(max_total_draft_tokens=4, eagle_choices=((0,),), use_dynamic_tree=True)
    with pytest.raises(ValidationError, match="EAGLE3"):
        TrtllmOptions(speculative_method="mtp", max_total_draft_tokens=4, use_dynamic_tree=True)
    with pytest.raises(ValidationError, match="needs max_total_draft_tokens"):
        TrtllmOptions(eagle_choices=((0,),))
    with pytest.raises(ValidationError, match="needs use_dynamic_tree"):
        TrtllmOptions(dynamic_tree_max_top_k=2)


def test_missing_checkpoints_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"engine\.checkpoint"):
        llm_spec(settings(checkpoint=None), TrtllmOptions())
    with pytest.raises(ConfigurationError, match="draft_checkpoint"):
        llm_spec(settings(draft_checkpoint=None), TrtllmOptions())


def test_sampling_params_per_request() -> None:
    options = TrtllmOptions()
    seeded = sampling_kwargs(request("a", U63 + 5, 0.7, top_k=20, top_p=0.9), options)
    assert seeded == {
        "max_tokens": 8,
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.9,
        "seed": U63 + 5,
        "end_id": -1,
        "detokenize": False,
    }
    unseeded = sampling_kwargs(request("b", None, 0.0), options)
    assert unseeded["seed"] is None and unseeded["top_k"] is None  # top_k 0: all logits
    assert unseeded["temperature"] == 0.0


# -- what a run observes ------------------------------------------------------------------


def test_observability_is_stated_not_guessed() -> None:
    seeded = [request("a", 1), request("b", 2), request("g", None, 0.0)]
    full = tap_observability(settings(), False, [seeded])
    assert full.steps and full.rng_state == "philox" and not full.drafts and not full.logits
    # One unseeded request is the only one with seed 42: its rows are still its own.
    alone = tap_observability(settings(), False, [[request("a", 1), request("b", None)]])
    assert alone.steps
    two = [request("a", 1), request("b", None), request("c", None)]
    shared = tap_observability(settings(), False, [two])
    assert not shared.steps and shared.rng_state == "philox"
    assert "b, c" in shared.notes
    clash = tap_observability(settings(), False, [[request("a", 42), request("b", None)]])
    assert not clash.steps and "a, b" in clash.notes
    assert not tap_observability(settings(verification="rejection"), False, [seeded]).steps
    graphs = tap_observability(settings(), True, [seeded])
    assert graphs.rng_state is None and "CUDA graphs" in graphs.notes
    assert tap_observability(settings(max_draft_len=0), False, [seeded]).rng_state is None
    tree = tap_observability(settings(), False, [seeded], tree=True)
    assert not tree.steps and tree.rng_state == "philox" and "tree drafting" in tree.notes


# -- recorded tap data to trace -----------------------------------------------------------


def recording(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((TAPS / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def trace_of(name: str) -> RunTrace:
    data = recording(name)
    requests = [request(r["id"], r["seed"]) for r in data["requests"]]
    steps = steps_from_tap(calls_from_json(data["calls"]), requests, "scenario")
    header = RunHeader(
        scenario="recorded",
        run=name,
        engine="trtllm",
        engine_config=EngineConfigRecord(max_draft_len=data["max_draft_len"], max_num_requests=4),
        contract="ideal",
        requests=tuple(
            RequestInfo(r.request_id, "scenario", (1, 2, 3), r.seed, 1.0, 0, 1.0, 8, 0)
            for r in requests
        ),
        observability=tap_observability(settings(), False, [requests]),
    )
    return RunTrace(header, tuple(steps), RunEnd(outputs={r.request_id: () for r in requests}))


def check(trace: RunTrace, contract: str, fn=rng_contract):  # type: ignore[no-untyped-def]
    ctx = CheckContext(
        scenario=load_library_scenario("reproducibility").scenario,
        traces={trace.name: trace},
        contract=get_contract(contract),
    )
    return list(fn(ctx, trace))


def test_recording_round_trips_through_json() -> None:
    data = recording("trtllm-strict-slot-span-fi074.json")
    calls = calls_from_json(data["calls"])
    assert all(isinstance(c, TapCall) for c in calls)
    assert calls_to_json(calls) == data["calls"]


def test_strict_calls_become_steps_with_hand_checked_rows() -> None:
    trace = trace_of("trtllm-strict-slot-span-fi074.json")
    # The driver made 4 calls: a (3 iterations) and b (4) from call 0, c (3) from call 1.
    assert [len(s.rows) for s in trace.steps] == [2, 3, 3, 2]
    assert [r.request_id for r in trace.steps[3].rows] == ["b", "c"]
    first, second = trace.steps[0], trace.steps[1]
    assert [r.request_id for r in first.rows] == ["a", "b"]
    assert [len(r.events) for r in first.rows] == [1, 1]  # context: one target row each
    a1, b1, c0 = second.rows
    assert (a1.decoding_iter, b1.decoding_iter, c0.decoding_iter) == (1, 1, 0)
    # K = 2: a generation request samples K + 1 = 3 target rows, kernel rows 0-2, 3-5, then c
    assert [(e.kind, e.index, e.kernel_row) for e in a1.events] == [
        ("target", 0, 0),
        ("target", 1, 1),
        ("target", 2, 2),
    ]
    assert [e.kernel_row for e in c0.events] == [6]
    # Slot-span, iteration 1, window (2K + 2) * 32 = 192: row j at 192 + 32 j
    assert [e.offset for e in a1.events] == [192, 224, 256]
    assert c0.events[0].seed == U63 + 5 and c0.events[0].offset == 0
    assert all(r.slot == -1 and r.emitted == () for s in trace.steps for r in s.rows)


def test_recorded_slot_span_follows_its_contract_and_not_pr17599() -> None:
    trace = trace_of("trtllm-strict-slot-span-fi074.json")
    (finding,) = check(trace, "trtllm-slot-span")
    assert finding.status == "pass", finding.message
    (wrong,) = check(trace, "trtllm-pr17599")
    assert wrong.status == "fail"
    assert any("follows contract trtllm-slot-span" in d for d in wrong.details)


def test_recorded_pr17599_layout_shares_offsets_across_target_rows() -> None:
    trace = trace_of("trtllm-strict-pr17599-fi074.json")
    (finding,) = check(trace, "trtllm-pr17599")
    assert finding.status == "pass", finding.message
    a1 = trace.steps[1].rows[0]
    assert [e.offset for e in a1.events] == [3, 3, 3]  # window K + 1 = 3, iteration 1
    (draws,) = check(trace, "trtllm-pr17599", draw_ranges_disjoint)
    assert draws.status in ("pass", "known-limitation")


def test_element0_flashinfer_is_caught_on_recorded_calls() -> None:
    # flashinfer 0.6.4 reads element 0 of the seed tensor: every row of a call used the first
    # row's seed. Rows are still attributed by the seed passed at each row.
    trace = trace_of("trtllm-strict-slot-span-fi064.json")
    b1 = trace.steps[1].rows[1]
    assert b1.request_id == "b" and {e.seed for e in b1.events} == {7}
    (finding,) = check(trace, "trtllm-slot-span")
    assert finding.status == "fail" and "b: offset, seed" in finding.message
    assert finding.suspects[0].defect == "row0-seed"
    assert "the seed of a at kernel row 0" in finding.suspects[0].why


def test_calls_that_cannot_be_attributed_are_refused() -> None:
    data = recording("trtllm-strict-slot-span-fi074.json")
    calls = calls_from_json(data["calls"])
    requests = [request(r["id"], r["seed"]) for r in data["requests"]]
    with pytest.raises(UnattributableCalls, match="CUDA graph"):
        steps_from_tap([replace(calls[0], columns=None, captured=True)], requests, "scenario")
    with pytest.raises(UnattributableCalls, match="chain_speculative_sampling"):
        steps_from_tap(
            [replace(calls[0], function="chain_speculative_sampling")], requests, "scenario"
        )
    with pytest.raises(UnattributableCalls, match="no scenario request"):
        steps_from_tap(calls, requests[:1], "scenario")
    # Rows of requests that share a seed are left out, not guessed.
    twins = [request("a", 7), request("a2", 7), *requests[1:]]
    steps = steps_from_tap(calls, twins, "scenario")
    assert {r.request_id for s in steps for r in s.rows} == {"b", "c"}


# -- the engine itself --------------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("tensorrt_llm") is not None, reason="tensorrt_llm is installed"
)
def test_adapter_without_tensorrt_llm_says_how_to_install_it() -> None:
    from specseed.engine_adapters.trtllm.adapter import TrtllmEngine

    with pytest.raises(EngineUnavailable) as raised:
        TrtllmEngine(settings())
    assert "tensorrt_llm" in raised.value.message
    assert raised.value.hint is not None and "pypi.nvidia.com" in raised.value.hint


def test_knobs_travel_under_tensorrt_llm_names() -> None:
    """Names as tensorrt_llm/sampling_params.py (commit 000a01de) declares them; a knob the
    request leaves unset is not sent, so TensorRT-LLM's default applies."""
    import dataclasses

    options = TrtllmOptions()
    base = request("a", 7, 0.7)
    assert not {"min_p", "n", "ignore_eos", "embedding_bias"} & set(sampling_kwargs(base, options))
    knobbed = dataclasses.replace(
        base,
        min_p=0.1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        repetition_penalty=1.2,
        stop_token_ids=(5, 9),
        ignore_eos=False,
        logprobs=2,
        n=3,
        logit_bias=((1, -100.0), (3, 2.5)),
    )
    kwargs = sampling_kwargs(knobbed, options, vocab_size=4)
    assert {k: kwargs[k] for k in ("min_p", "presence_penalty", "frequency_penalty",
                                   "repetition_penalty", "ignore_eos", "logprobs", "n")} == {
        "min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "repetition_penalty": 1.2, "ignore_eos": False, "logprobs": 2, "n": 3,
    }  # fmt: skip
    assert kwargs["stop_token_ids"] == [5, 9]
    assert kwargs["embedding_bias"] == [0.0, -100.0, 0.0, 2.5]
    with pytest.raises(ConfigurationError, match="outside the vocabulary"):
        sampling_kwargs(knobbed, options, vocab_size=2)
    stopped = sampling_kwargs(dataclasses.replace(base, stop=("\n",)), options)
    assert stopped["stop"] == ["\n"] and stopped["detokenize"] is True
