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
)

DEFECT_IDS: tuple[str, ...] = tuple(d.id for d in DEFECTS)
_BY_ID = {d.id: d for d in DEFECTS}


def get_defect(defect_id: str) -> DefectClass:
    """The defect class with this id; ``KeyError`` if there is none."""
    return _BY_ID[defect_id]
