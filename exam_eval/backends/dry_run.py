"""What a grading run would do, told without a model: the --dry-run report of exam-grade
and exam-nuggets support (the session's plan counted, the prompt tokens it would send,
counted with the model's tokenizer where one is on this machine, and the time to expect
from the cache's measured rate)."""

from __future__ import annotations

from ..grading.engine import estimate_seconds
from . import registry
from .hf_common import pretrained_source


def dry_run_lines(plan, grader, cache, shard) -> list[str]:
    """The report's lines: the plan's counts, the prompt tokens and the time to expect."""
    s = plan.stats
    todo_pairs = sum(len(u.pairs) for u in plan.units_todo)
    rate = cache.throughput(grader.cache_identity)
    est = estimate_seconds(s.units_to_grade, rate)
    lines = [
        ("pool (passages with text)", s.pool),
        ("passages without text", s.missing),
        ("pairs" + (f" in shard {shard}" if shard else ""), s.pairs),
        ("already in output", s.in_output),
        ("from cache", s.from_cache),
        ("to grade (pairs)", todo_pairs),
        ("model calls after deduplication", s.units_to_grade),
    ]
    tokens, how = estimate_prompt_tokens(grader, plan.units_todo)
    lines.append((f"prompt tokens to send ({how})", tokens))
    out = [f"{label}\t{value}" for label, value in lines]
    if est is None:
        out.append(f"estimated time\tunknown (no finished run of {grader.cache_identity} in the cache yet)")
    else:
        out.append(f"estimated time\t{hms(est)} (at {rate:.2f} calls/s measured on the last run)")
    return out


def _tokenizer_of(grader):
    """The grading model's tokenizer where one is at hand without a download: a local
    back end's checkpoint, or an endpoint's model id that names a checkpoint on this
    machine (a path, or one in the Hugging Face cache); None otherwise."""
    ref = getattr(grader, "_ref", None) or getattr(grader, "model_id", None)
    if not ref or registry.has(getattr(grader, "name", ""), "no-tokenizer"):
        return None
    try:
        from transformers import AutoTokenizer

        source, gguf = pretrained_source(str(ref))
        return AutoTokenizer.from_pretrained(source, local_files_only=True, **gguf)
    except Exception:  # noqa: BLE001 - no tokenizer here: the estimate says so
        return None


def estimate_prompt_tokens(grader, units) -> tuple[int, str]:
    """The prompt tokens the units to grade would send (as rendered, without a chat
    template's own tokens), and how they were counted."""
    # the whole passage, uncut: a dry run loads no model, so the window is not known yet
    texts = [unit.request.prompt.render(**unit.request.texts(unit.request.context)) for unit in units]
    if not texts:
        return 0, "none to send"
    tok = _tokenizer_of(grader)
    if tok is None:
        return sum(max(1, len(t) // 4) for t in texts), "estimated at 4 characters a token: no tokenizer here"
    total = 0
    for start in range(0, len(texts), 1024):
        total += sum(len(ids) for ids in tok(texts[start:start + 1024], add_special_tokens=False)["input_ids"])
    return total, "counted with the model's tokenizer"


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
