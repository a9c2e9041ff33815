"""The catalogue of known defect classes, as data: each id with what goes wrong, where it was
seen and how the reference engine reproduces it.

Ids are stable: model.yaml names them under ``engine.options.defects``, the reference engine
injects them, checks name them as ``suspects``, and contracts name the ones they accept as known
limitations. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DefectClass:
    """One class of reproducibility defect seen in a real engine."""

    id: str
    """Stable identifier, e.g. ``row0-seed``."""
    summary: str
    """One line: what goes wrong."""
    seen_in: str
    """Where it was seen (engine, PR or issue)."""
    injection: str
    """One line: how the reference engine reproduces it when ``defects: [id]`` is set."""
    search_only: bool = False
    """Planted for ``specseed search`` to find: no built-in scenario triggers it, so the
    detection matrix and the library's coverage leave it out (``SEARCH_ONLY_DEFECTS``)."""


DEFECTS: tuple[DefectClass, ...] = (
    DefectClass(
        "engine-counter",
        "one engine-wide seed incremented per sampling call; SamplingParams.seed ignored; "
        "output depends on engine uptime",
        "TensorRT-LLM before PR 'Honor SamplingParams.seed on the one-model speculative path'",
        "every sampling call takes seed = an engine-wide counter (then counter += 1) and "
        "offset 0, whatever the request asked for",
    ),
    DefectClass(
        "row0-seed",
        "the kernel reads element 0 of the seed/offset arrays; mixed-seed batches draw "
        "from the first row's seed",
        "flashinfer 0.6.4 to 0.7.1 (pinned by TensorRT-LLM 1.2.1)",
        "the sampler runs in flashinfer 0.6.4 mode: every row of a call uses seed[0] and offset[0]",
    ),
    DefectClass(
        "row-subsequence",
        "subsequence = batch row, so a seeded request's tokens change with its batch position",
        "flashinfer kernels (curand_init(seed, blockIdx.x, offset)); TensorRT-LLM's stated limit",
        "the engine leaves the Philox subsequence at the kernel's default, the row index",
    ),
    DefectClass(
        "overlap-window-reuse",
        "the overlap scheduler prepares batch N+1 before batch N's iteration count advances; "
        "adjacent iterations reuse an offset window",
        "review of the TensorRT-LLM PR",
        "with overlap_scheduler on, RNG metadata for step N+1 is filled from the iteration "
        "counters before step N's results are applied",
    ),
    DefectClass(
        "warmup-overflow",
        "per-request buffers sized max_num_requests; a warmup batch above that crashes",
        "review of the TensorRT-LLM PR",
        "the seed/offset buffers hold max_num_requests entries, so a larger warmup batch "
        "fails to fill them",
    ),
    DefectClass(
        "draft-shared-offset",
        "every draft step uses the same offset, so all draft steps draw identical numbers",
        "named in the TensorRT-LLM PR",
        "every draft step i samples at the offset of draft step 0",
    ),
    DefectClass(
        "unseeded-shared-stream",
        "unseeded requests on fresh slots all get the same (seed, offset) stream: identical samples",
        "TensorRT-LLM issue 19487",
        "an unseeded request takes the default seed 42 instead of a seed of its own",
    ),
    DefectClass(
        "neighbor-unseeded",
        "a seed is ignored when another request in the batch has none",
        "vLLM issue 51226",
        "when any row of a batch is unseeded, every row of it samples from the engine's own "
        "stream instead of its request's seed",
    ),
    DefectClass(
        "draw-overlap",
        "two sampling events of one request read overlapping (seed, subsequence, offset) ranges",
        "follows from the one-model layout (a multi-draw kernel running into the next slot)",
        "the offset slots of one decoding iteration are one draw apart, so a multi-draw "
        "kernel runs into the next slot",
    ),
    DefectClass(
        "seed-high-bits-dropped",
        "the engine keeps only the low 32 bits of a 64-bit seed, so seeds that differ only in "
        "their high bits give one stream",
        "planted by specseed (issue 38): a server or gateway that stores the seed in 32 bits",
        "every request seed is reduced to its low 32 bits before it seeds the sampler",
    ),
    DefectClass(
        "greedy-drift",
        "greedy speculative output differs from greedy non-speculative output",
        "TensorRT-LLM issue 8285, vLLM issue 42517",
        "target verification of draft positions runs in bfloat16, unlike plain decoding",
    ),
    DefectClass(
        "biased-acceptance",
        "the accept test or residual is wrong, so the output distribution differs from the "
        "target's",
        "SGLang issue 35771",
        "the residual distribution after a rejection is not normalised before it is sampled",
    ),
    DefectClass(
        "accept-reuses-draft-draw",
        "the accept test's uniform is the very number that drew the draft it tests, so "
        "acceptance depends on the draft drawn and the output is biased",
        "planted by specseed (issue 12): one random number shared by a draft step and its "
        "own accept test",
        "draft step i draws at the offset the next iteration's accept kernel reads for position i",
    ),
    DefectClass(
        "draft-temperature-skipped",
        "the draft probabilities handed to the accept test are taken at temperature 1 "
        "while the drafts were drawn at the request's temperature, so the accept ratio is wrong",
        "planted by specseed (issue 12): temperature applied to the draft's sampling but "
        "not to its probabilities in the accept ratio",
        "the draft head's probabilities kept for verification are softmax(logits), not "
        "softmax(logits / T)",
    ),
    DefectClass(
        "spec-knobs-dropped",
        "logit_bias, min_p and the penalties act on the first token and without speculation, "
        "but not on verified or drafted tokens: the speculative sampler takes temperature, "
        "top-k and top-p only",
        "vLLM issue 42744 (min_p and logit_bias skipped on verified tokens), TensorRT-LLM PR "
        "17701 (one-model speculation silently ignored the penalties) and PR 17955, SGLang "
        "PR 22049 (spec v2 ignored the penalties and logit_bias during verification)",
        "with max_draft_len > 0, verification and draft positions are sampled from the "
        "unprocessed logits; the prefill's token and K = 0 decoding apply every knob",
    ),
    DefectClass(
        "penalty-stale-in-step",
        "penalty state is fed once per engine step, with the step's last token: the positions "
        "of one verification step are penalised without the drafts accepted earlier in it, "
        "and accepted drafts never count at all",
        "SGLang PR 33643 (only the step's last accepted token fed to the penalizers) and PR "
        "40244 (one penalty state broadcast over every position of a verify block)",
        "the penalties count one token per step (its last), and every position of a "
        "verification step is penalised with those counts, not with the output plus the "
        "drafts before it",
    ),
    DefectClass(
        "tokens-past-stop",
        "a stop or end-of-sequence token accepted among the drafts does not end the request: "
        "the tokens after it are kept and generation goes on",
        "llama.cpp issue 28049 (tokens accepted past end-of-generation)",
        "only the last token a step emits is tested for a stop; accepted drafts are not",
    ),
    DefectClass(
        "fake-logprobs",
        "tokens accepted from drafts report a log-probability that is not the target's (0.0, "
        "or the draft's)",
        "llama.cpp issue 27972 (speculative log-probabilities reported as 0.0)",
        "an accepted draft token's reported log-probability is 0.0; the bonus token's is computed",
    ),
    DefectClass(
        "unset-temperature-greedy",
        "a sampled request whose temperature is the default is decoded at the greedy "
        "sentinel 1e-5 on the speculative path: its top-k or top-p filter has no effect and "
        "its tokens are the greedy ones",
        "TensorRT-LLM PR 19390 (an unset temperature became 1e-5 for non-greedy one-model "
        "speculative rows, so top_k=50 requests decoded greedily)",
        "with max_draft_len > 0, a request at temperature 1 with top_k or top_p set samples "
        "at temperature 1e-5",
    ),
    DefectClass(
        "children-shared-stream",
        "the n children of a seeded request all sample under the request's seed: identical "
        "children",
        "planted by specseed (issue 36): vLLM's parallel sampling gives child i seed + i "
        "(ParentRequest); an engine that copies the parent's parameters whole does not",
        "every child of a request with n > 1 samples under the parent's seed",
    ),
)

SEARCH_ONLY_DEFECTS: tuple[DefectClass, ...] = (
    DefectClass(
        "long-prefill-shift",
        "a prefill of a long prompt moves the RNG offsets of the requests batched beside it",
        "planted by specseed (issue 37): gated on prompt length, for the search to find",
        "a step that prefills a prompt of more than 64 tokens samples every other row of that "
        "step at its next iteration's offset window",
        search_only=True,
    ),
    DefectClass(
        "seed-low-bits",
        "seeds are cached by their low 32 bits: a seed that shares them with the seed of a "
        "request admitted in an earlier step (one of the two above 2**32) draws from that "
        "request's stream",
        "planted by specseed (issue 37): gated on seeds above 2**32 admitted in different "
        "steps, for the search to find",
        "the engine caches one seed per low-32-bit value, filled after each step: a request "
        "admitted later whose seed has the same low bits samples with the cached one",
        search_only=True,
    ),
    DefectClass(
        "slot-reuse-offset",
        "a top-p request on a reused sequence slot continues the offset counter of the "
        "greedy request before it",
        "planted by specseed (issue 37): gated on slot reuse and top-p, for the search to find",
        "a request sampled with top_p < 1, admitted to a slot on which two requests finished, "
        "the last one greedy, starts its offset windows where the greedy request stopped",
        search_only=True,
    ),
    DefectClass(
        "knob-combo-window",
        "a request at temperature below 0.7 with both top_k and top_p set, batched with a "
        "greedy request, samples at the wrong offset window",
        "planted by specseed (issue 37): gated on a sampling-knob combination, for the search "
        "to find",
        "in a step with a greedy row, a row at temperature < 0.7 with top_k > 0 and top_p < 1 "
        "samples at its next iteration's offset window",
        search_only=True,
    ),
)
"""Defects planted for ``specseed search`` to find (``search_only``): gated on traffic that
no built-in scenario sends. Injectable like the others; not in ``DEFECT_IDS``, the classes
the built-in library is built to expose (the detection matrix)."""

DEFECT_IDS: tuple[str, ...] = tuple(d.id for d in DEFECTS)
"""The defect classes the built-in library and the checks are built to expose."""
SEARCH_ONLY_DEFECT_IDS: tuple[str, ...] = tuple(d.id for d in SEARCH_ONLY_DEFECTS)
INJECTABLE_DEFECT_IDS: tuple[str, ...] = DEFECT_IDS + SEARCH_ONLY_DEFECT_IDS
"""Every id ``engine.options.defects`` takes."""
_BY_ID = {d.id: d for d in (*DEFECTS, *SEARCH_ONLY_DEFECTS)}


def get_defect(defect_id: str) -> DefectClass:
    """The defect class with this id; ``KeyError`` if there is none."""
    return _BY_ID[defect_id]
