"""The published prompts: golden renderings typed by hand from the papers, checked against
the papers' text, placeholder safety, the registry and custom prompt files."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from exam_eval.errors import InputError, UsageError
from exam_eval.grading.prompts import REGISTRY, Prompt, get_prompt

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parents[1] / "golden" / "prompts"
PAPERS = ROOT.parent / "shared" / "papers"

QUERY = "how do vaccines train the immune system"
QUESTION = "What do vaccines contain?"
NUGGET = "weakened or inactivated pathogens"
CONTEXT = "Vaccines contain weakened or inactivated forms of a pathogen, which train the immune system."
ANSWER = "inactivated pathogens"
CORRECT = "weakened or killed germs"

PUBLISHED = {
    "question-selfrating", "question-extraction", "answer-verification",
    "nugget-selfrating", "nugget-extraction",
    "sun", "sun-few", "faggioli-b", "faggioli-b-few", "helm", "thomas",
    "umbrela", "ci-dl", "ci-robust04",
}


def published():
    return sorted(k for k in REGISTRY if not k.startswith("file:"))


def rendered(prompt: Prompt) -> str:
    item = {"question": QUESTION, "nugget": NUGGET, "direct": None}[prompt.target]
    return prompt.render(query=QUERY, item=item, context=CONTEXT, answer=ANSWER, correct_answer=CORRECT)


def golden(prompt_id: str) -> str:
    text = (GOLDEN / f"{prompt_id}.txt").read_text(encoding="utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n")
    return text[:-1]


# published prompts whose sources are not in ../shared/papers (tests/grading/test_rag_prompts.py)
OTHER_SOURCES = {"nuggetizer-assign", "citation-support"}


def test_every_published_prompt_is_registered():
    assert set(published()) == PUBLISHED | OTHER_SOURCES


@pytest.mark.parametrize("prompt_id", sorted(PUBLISHED))
def test_golden_rendering(prompt_id):
    assert rendered(get_prompt(prompt_id)) == golden(prompt_id)


# -- the golden files against the papers' text --------------------------------------------

def _norm(text: str) -> str:
    """Whitespace-insensitive form; also undoes the markdown escape of "_" in the text files."""
    return re.sub(r"\s+", " ", text.replace("\\_", "_")).strip()


@pytest.fixture(scope="module")
def papers():
    if not PAPERS.is_dir():
        pytest.skip("../shared/papers is not present")
    return {p.stem: _norm(p.read_text(encoding="utf-8")) for p in PAPERS.glob("*.txt")}


# For each prompt: the paper, and how that paper writes each placeholder we filled in.
PAPER_FORMS = {
    "question-selfrating": ("exam-plusplus", {QUESTION: "{question}", CONTEXT: "{context}"}),
    "question-extraction": ("exam-plusplus", {QUESTION: "{question}", CONTEXT: "{context}"}),
    "answer-verification": ("exam-plusplus", {QUESTION: "{question}", CORRECT: "{correct_answer}",
                                              ANSWER: "{answer}"}),
    "nugget-selfrating": ("rubric-grading-workbench", {NUGGET: "{nugget}", CONTEXT: "{context}"}),
    "nugget-extraction": ("rubric-grading-workbench", {NUGGET: "{nugget}", CONTEXT: "{context}"}),
    "thomas": ("exam-plusplus", {QUERY: "{query_title}", CONTEXT: "{context}"}),
    "faggioli-b": ("exam-plusplus", {QUERY: "{query title}", CONTEXT: "{context}"}),
    "faggioli-b-few": ("exam-plusplus", {QUERY: "{query_title}", CONTEXT: "{context}"}),
    "helm": ("exam-plusplus", {QUERY: "{query_title}", CONTEXT: "{context}"}),
    "sun": ("exam-plusplus", {QUERY: "{query_title}", CONTEXT: "{context}"}),
    "umbrela": ("umbrela", {QUERY: "query", CONTEXT: "passage"}),
    "ci-dl": ("confidence-intervals-ppi-crc", {QUERY: "{query}", CONTEXT: "{passage}"}),
    "ci-robust04": ("confidence-intervals-ppi-crc", {QUERY: "{query}", CONTEXT: "{document}"}),
}


def as_paper_writes_it(prompt_id: str, forms: dict[str, str]) -> str:
    text = golden(prompt_id)
    for value in sorted(forms, key=len, reverse=True):
        assert value in text, f"{prompt_id}: golden file lacks the filled-in value {value!r}"
        text = text.replace(value, forms[value])
    return text


def unflatten_list(text: str) -> str:
    """The workbench's Table 2 prints a scale list flattened: "- 5: A 4: B ... 0: F." (no
    bullets, no periods after the first line). This is the documented fix reversed."""
    return re.sub(r"\.\n- (?=[0-4]:)", " ", text)


# Where each prompt is printed: the paper's text from ``start`` up to (not including) ``end``
# (None: the end of the file; "\t": the end of the table cell). The golden text must equal
# that whole span, so a missing first or last line fails as surely as a changed word.
PAPER_SPANS = {
    "question-extraction": ("provide a complete and concise answer", "\n## **Optional"),
    "answer-verification": ('For the question "{question}"', "\n#### **Self-rating"),
    "question-selfrating": ("Can the question be answered based on the available context? choose one:\n\n- 5",
                            "\n## 4.1.2."),
    "nugget-selfrating": ("Given the context, evaluate the coverage", "\t"),
    "nugget-extraction": ("Extract the passage from the text", "\t"),
    "thomas": ("Instruction: You are a search quality rater", "\n**FaggioliB** [6]"),
    "faggioli-b": ("Instruction: Indicate if the passage is relevant for the question. Respond with 'Yes' or "
                   "'No'.\n\nQuestion:", "\n**HELM** [7]"),
    "helm": ("Instruction: Does the passage answer the query?", "\n**Sun** [5]"),
    "sun": ("Instruction: Given a passage and a query", "\n**FaggioliB\\_few** [6]"),
    "faggioli-b-few": ("Instruction: Indicate if the passage is relevant for the question. Respond with 'Yes' or "
                       "'No'.\n\nPassage:", "\n**Sun\\_few** [5]"),
    # after minted's option line, which is typesetting
    "umbrela": ("Given a query and a passage, you must provide", "\nFigure 1. Prompt used"),
    # the captions are "Listing\N{NO-BREAK SPACE}1: ..." in the text file
    "ci-dl": ("1: Prompt for TREC-DL.\n", "Listing\N{NO-BREAK SPACE}2:"),
    "ci-robust04": ("2: Prompt for Robust04.\n", None),
}


@pytest.fixture(scope="module")
def raw_papers():
    if not PAPERS.is_dir():
        pytest.skip("../shared/papers is not present")
    return {p.stem: p.read_text(encoding="utf-8") for p in PAPERS.glob("*.txt")}


def paper_span(raw_papers, prompt_id: str) -> str:
    paper = raw_papers[PAPER_FORMS[prompt_id][0]]
    start, end = PAPER_SPANS[prompt_id]
    i = paper.index(start)
    if start[0].isdigit():
        i += len(start)  # the caption is not part of the prompt
    j = len(paper) if end is None else paper.index(end, i)
    return paper[i:j]


def _lines(text: str) -> list[str]:
    """Non-blank lines, each with its inner whitespace runs made one space: what the text
    extraction of a paper preserves of a prompt's layout."""
    return [re.sub(r"\s+", " ", line).strip() for line in text.replace("\\_", "_").splitlines() if line.strip()]


def test_every_published_prompt_has_a_paper_span():
    assert set(PAPER_SPANS) == set(PAPER_FORMS) == PUBLISHED - {"sun-few"}  # sun-few: see below


@pytest.mark.parametrize("prompt_id", sorted(PAPER_FORMS))
def test_golden_text_is_the_papers_listing(raw_papers, prompt_id):
    paper, forms = PAPER_FORMS[prompt_id]
    text = as_paper_writes_it(prompt_id, forms)
    span = paper_span(raw_papers, prompt_id)
    if paper == "rubric-grading-workbench":
        # a table cell: its line structure is lost, only the words and their order remain
        assert _norm(unflatten_list(text)) == _norm(span)
    else:
        assert _lines(text) == _lines(span)


def test_ci_robust04_ends_with_the_relevance_line_of_listing_2(raw_papers):
    assert paper_span(raw_papers, "ci-robust04").rstrip().endswith("Document: {document}\nRelevance:")
    assert golden("ci-robust04").endswith("\nRelevance:")
    assert get_prompt("ci-robust04").template.endswith("Document: {context}\nRelevance:")


@pytest.mark.parametrize("change", [
    lambda t: t.replace("Does the passage", "Does this passage", 1),  # one word
    lambda t: t.rsplit("\n", 1)[0],  # the last line dropped
    lambda t: t.split("\n", 1)[1],  # the first line dropped
    lambda t: t.replace("Yes", "yes", 1),  # one letter's case
])
def test_paper_span_check_can_fail(raw_papers, change):
    text = change(as_paper_writes_it("helm", PAPER_FORMS["helm"][1]))
    assert _lines(text) != _lines(paper_span(raw_papers, "helm"))


def test_list_fix_rule_reproduces_the_workbench_rendering_of_the_question_prompt(papers):
    # Evidence for the nugget-selfrating fix: the EXAM++ question self-rating prompt, flattened
    # by the same rule, is exactly what the workbench's table shows for that prompt.
    text = unflatten_list(as_paper_writes_it("question-selfrating", PAPER_FORMS["question-selfrating"][1]))
    assert _norm(text) in papers["rubric-grading-workbench"]
    assert _norm(as_paper_writes_it("question-selfrating", PAPER_FORMS["question-selfrating"][1])) \
        not in papers["rubric-grading-workbench"]


def test_question_extraction_is_also_the_original_exam_prompt(papers):
    text = as_paper_writes_it("question-extraction", PAPER_FORMS["question-extraction"][1])
    assert _norm(text) in papers["exam-flan-t5-answerability-metric"]


def test_sun_few_is_sun_with_the_faggioli_few_examples(papers):
    # The paper only describes Sun_few ("Prompt Sun with the same few shot examples as
    # FaggioliB_few"): Sun's instruction must be the paper's, the rest FaggioliB_few's.
    forms = {QUERY: "{query_title}", CONTEXT: "{context}"}
    sun_instruction, rest = as_paper_writes_it("sun-few", forms).split("\n\n", 1)
    fag_instruction, fag_rest = as_paper_writes_it("faggioli-b-few", forms).split("\n\n", 1)
    assert rest == fag_rest
    assert _norm(sun_instruction + "\n\nQuestion: {query_title} Passage: {context}") in papers["exam-plusplus"]
    assert _norm(fag_instruction + "\n\n" + rest) in papers["exam-plusplus"]


# -- rendering mechanics -------------------------------------------------------------------

@pytest.mark.parametrize("prompt_id", sorted(PUBLISHED))
def test_untrusted_text_is_inserted_literally(prompt_id):
    prompt = get_prompt(prompt_id)
    nasty_context = "x {question} {query} {context} {answer} {0} {} {{ }} %s y"
    nasty_query = "q {context} {nugget}"
    item = None if prompt.target == "direct" else "i {query} }{"
    out = prompt.render(query=nasty_query, item=item, context=nasty_context, answer="a {item}",
                        correct_answer="c {context}")
    if "context" in prompt.placeholders:
        assert nasty_context in out
    if "query" in prompt.placeholders:
        assert nasty_query in out
    # Nothing the user wrote was expanded: every brace group in the output comes from the
    # user's text or the published template itself.
    expected_groups = (
        len(re.findall(r"\{[^{}]*\}", prompt.template))
        - sum(len(re.findall(r"\{" + name + r"\}", prompt.template)) for name in prompt.placeholders)
    )
    user_texts = {"context": nasty_context, "query": nasty_query, "question": item or "", "nugget": item or "",
                  "item": item or "", "answer": "a {item}", "correct_answer": "c {context}"}
    for name in prompt.placeholders:
        expected_groups += len(re.findall(r"\{" + name + r"\}", prompt.template)) * \
            len(re.findall(r"\{[^{}]*\}", user_texts[name]))
    assert len(re.findall(r"\{[^{}]*\}", out)) == expected_groups


@pytest.mark.parametrize("prompt_id", sorted(PUBLISHED))
def test_overhead_is_the_prompt_without_the_passage(prompt_id):
    prompt = get_prompt(prompt_id)
    item = None if prompt.target == "direct" else QUESTION
    full = prompt.render(query=QUERY, item=item, context=CONTEXT, answer=ANSWER, correct_answer=CORRECT)
    bare = prompt.overhead(QUERY, item, answer=ANSWER, correct_answer=CORRECT)
    n_context = prompt.template.count("{context}")
    assert len(full) - len(bare) == n_context * len(CONTEXT)
    assert CONTEXT not in bare


@pytest.mark.parametrize("prompt_id", sorted(PUBLISHED))
def test_messages_are_one_user_turn_for_the_published_prompts(prompt_id):
    prompt = get_prompt(prompt_id)
    item = None if prompt.target == "direct" else QUESTION
    msgs = prompt.messages(query=QUERY, item=item, context=CONTEXT, answer=ANSWER, correct_answer=CORRECT)
    assert msgs == [{"role": "user", "content": rendered(prompt) if prompt.target != "nugget"
                     else prompt.render(query=QUERY, item=item, context=CONTEXT)}]


def test_system_and_shots_in_render_and_messages():
    p = Prompt(id="t-sys", source="test", target="direct", mode="generate", labels=(), scale=(0, 1),
               template="Q: {query} P: {context}", system="SYS {query}", shots=(("U1", "A1"),), joiner="\n\n")
    assert p.render(query="q", item=None, context="c") == "SYS q\n\nU1\n\nA1\n\nQ: q P: c"
    assert p.messages(query="q", item=None, context="c") == [
        {"role": "system", "content": "SYS q"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q: q P: c"},
    ]


def test_scale_labels_modes_of_the_published_prompts():
    expect = {
        "question-selfrating": ("score", (0, 5)), "nugget-selfrating": ("score", (0, 5)),
        "question-extraction": ("generate", (0, 1)), "nugget-extraction": ("generate", (0, 1)),
        "answer-verification": ("score", (0, 1)),
        "sun": ("score", (0, 1)), "sun-few": ("score", (0, 1)), "faggioli-b": ("score", (0, 1)),
        "faggioli-b-few": ("score", (0, 1)), "helm": ("score", (0, 1)), "thomas": ("score", (0, 2)),
        "umbrela": ("generate", (0, 3)), "ci-dl": ("score", (0, 3)), "ci-robust04": ("score", (0, 2)),
    }
    for pid, (mode, scale) in expect.items():
        p = get_prompt(pid)
        assert (p.mode, p.scale) == (mode, scale), pid
    assert get_prompt("sun").label_grades() == {"No": 0, "Yes": 1}
    assert get_prompt("ci-robust04").label_grades() == {"[0]": 0, "[1]": 1, "[2]": 2}
    assert get_prompt("question-extraction").needs_verification
    assert not get_prompt("question-selfrating").needs_verification


def test_hash_is_stable_and_content_addressed():
    p = get_prompt("sun")
    assert re.fullmatch(r"[0-9a-f]{16}", p.hash)
    clone = dataclasses.replace(p, id="sun-clone", description="another name")
    assert clone.hash == p.hash  # the id and description do not change a grade
    changed = dataclasses.replace(p, id="sun-changed", template=p.template + " ")
    assert changed.hash != p.hash
    relabelled = dataclasses.replace(p, id="sun-lc", labels=("no", "yes"))
    assert relabelled.hash != p.hash
    assert len({get_prompt(i).hash for i in PUBLISHED}) == len(PUBLISHED)


def test_unknown_prompt_is_a_usage_error_listing_the_ids():
    with pytest.raises(UsageError) as err:
        get_prompt("no-such-prompt")
    assert err.value.exit_code == 1
    for pid in PUBLISHED:
        assert pid in str(err.value)


# -- custom prompt files --------------------------------------------------------------------

def test_custom_prompt_file(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("# labels: 0 1 2 3\n# source: my lab\n\nRate {question} with {context}. JSON: {\"a\": 1}\n")
    p = get_prompt(str(f))
    assert p.id == f"file:{f}"
    assert (p.target, p.mode, p.labels, p.scale, p.source) == ("question", "score", ("0", "1", "2", "3"), (0, 3),
                                                              "my lab")
    assert p.render(query="q", item="Q?", context="C") == 'Rate Q? with C. JSON: {"a": 1}'
    assert p.parse("3").grade == 3 and p.parse("4").parse_ok is False
    assert get_prompt(f"file:{f}") == p
    # Editing the file changes the prompt and its hash.
    f.write_text("# labels: 0 1 2 3\n\nRate {question} given {context}.\n")
    assert get_prompt(str(f)).hash != p.hash


def test_custom_prompt_with_system_part_and_defaults(tmp_path):
    f = tmp_path / "chat.txt"
    f.write_text("=== system ===\nYou are a judge.\n=== user ===\nQuery: {query}\nPassage: {context}\n")
    p = get_prompt(str(f))
    assert (p.target, p.mode, p.labels, p.parser) == ("direct", "generate", (), "rating")
    assert p.messages(query="q", item=None, context="c") == [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "Query: q\nPassage: c"},
    ]


def test_custom_nugget_extraction_defaults(tmp_path):
    f = tmp_path / "n.txt"
    f.write_text("# parser: extraction\nFind {nugget} in {context}")
    p = get_prompt(str(f))
    assert p.target == "nugget" and p.parse("it does not say").grade == 0
    assert not p.needs_verification


@pytest.mark.parametrize("content, line, message", [
    ("Q: {query}\nP: {passage}\n", 2, "unknown placeholder {passage}"),
    ("# mdoe: score\nQ {query} {context}", 1, "unknown front-matter key"),
    ("# mode: score\nQ {query} {context}", 1, "needs '# labels"),
    ("# labels: 0 1\n# scale: 0 5\nQ {query} {context}", 1, "2 labels for the scale 0-5"),
    ("# parser: magic\nQ {query} {context}", 1, "parser must be one of"),
    ("# target: topic\nQ {query} {context}", 1, "target must be one of"),
    ("Q: {query} and nothing else", None, "no {context} placeholder"),
    ("# labels: 0 1\n", None, "no prompt text"),
])
def test_bad_custom_prompt_files(tmp_path, content, line, message):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    with pytest.raises(InputError) as err:
        get_prompt(str(f))
    assert err.value.exit_code == 2
    assert err.value.path == str(f) and err.value.line == line
    assert message in str(err.value)


def test_published_id_wins_over_a_file_of_the_same_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sun").write_text("Mine: {query} {context}")
    assert get_prompt("sun") is REGISTRY["sun"]
    assert get_prompt("file:sun").template == "Mine: {query} {context}"


def test_man_fragment_lists_every_prompt():
    text = (ROOT / "man" / "prompts.fragment.roff").read_text(encoding="utf-8")
    for pid in PUBLISHED:
        p = get_prompt(pid)
        assert re.search(r"^\.TP\n\\fB" + re.escape(pid.replace("-", r"\-")) + r"\\fR", text, re.MULTILINE), pid
        assert f"{p.scale[0]}\\(en{p.scale[1]}" in text
