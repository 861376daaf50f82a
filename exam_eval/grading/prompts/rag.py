"""RAG-track prompts: nugget assignment (AutoNuggetizer) and citation support.

nuggetizer-assign   The AutoNuggetizer's nugget-assignment prompt (Pradeep et al. 2024,
                    "Initial Nugget Evaluation Results for the TREC 2024 RAG Track with the
                    AutoNuggetizer Framework", arXiv 2411.09607), three grades. Text from
                    castorini/nuggetizer, src/nuggetizer/prompts/prompt_templates/
                    assigner_template.yaml (commit b861b19; the same text as the f-string of
                    the package's earlier assigner_prompts.py): a system message and a user
                    message. Labels: not_support 0, partial_support 1, support 2.
citation-support    The support-assessment prompt of the TREC 2024 RAG Track (Thakur et al.
                    2025, "Support Evaluation for the TREC 2024 RAG Track: Comparing Human
                    versus LLM Judges", arXiv 2504.15205), three grades: no_support 0,
                    partial_support 1, full_support 2. The paper itself cannot be read
                    offline here; the text is the copy in vectara/open-rag-eval,
                    open_rag_eval/metrics/citation_metric.py (commit 3d52a8d), whose LaTeX
                    quotes (``full_support'') show it was taken from the paper's source. Its
                    line breaks are the figure's wrapping, not part of the prompt: each
                    paragraph is one line here, paragraphs separated by a blank line, and the
                    LaTeX quotes are plain double quotes.

Both are written for one nugget (statement) per call, so a grade is one (item, passage)
pair like every other grade, goes through the same engine and cache, and survives a bank
edit. The AutoNuggetizer sends up to ten nuggets per call; with one nugget its
``{num_nuggets}`` is 1 and its ``{nuggets}`` list holds that one nugget, written as
Python writes a one-element list of strings (``repr``), exactly as the nuggetizer builds
it. The statement of citation-support is the bank item (``{item}``/``{nugget}``; a
report sentence when the grades come from ``exam-nuggets support``) and the citation is
the passage (``{context}``).

Parsing: a grade only from text that states one label. nuggetizer-assign answers a
Python list (``['support']``, possibly in a code fence); a list of one label or the bare
label is read, anything else (no list, several labels, unknown words) is parse_ok false.
citation-support answers one of its three labels (or the option names "Full Support",
...); an answer naming two different labels is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from exam_eval.grading.prompts.base import Prompt, register

NUGGETIZER_SOURCE = "AutoNuggetizer (Pradeep et al. 2024), castorini/nuggetizer assigner_template.yaml"
SUPPORT_SOURCE = "TREC 2024 RAG support (Thakur et al. 2025), via vectara/open-rag-eval"

NUGGET_LABELS = ("not_support", "partial_support", "support")
SUPPORT_LABELS = ("no_support", "partial_support", "full_support")


@dataclass(frozen=True)
class NuggetListPrompt(Prompt):
    """The nuggetizer's prompt: ``{nugget}`` is written as a one-element Python list.

    Its parsers are registered in :data:`exam_eval.grading.parsing.PARSERS` as
    ``nugget-label-list`` and ``support-label``."""

    @staticmethod
    def _values(query, item, context, answer, correct_answer) -> dict[str, str]:
        values = Prompt._values(query, item, context, answer, correct_answer)
        values["nugget"] = repr([values["nugget"]])
        return values


NUGGETIZER_SYSTEM = (
    "You are NuggetizeAssignerLLM, an intelligent assistant that can label a list of atomic nuggets "
    "based on if they are captured by a given passage."
)

register(NuggetListPrompt(
    id="nuggetizer-assign",
    source=NUGGETIZER_SOURCE,
    target="nugget",
    mode="generate",
    labels=NUGGET_LABELS,
    scale=(0, 2),
    parser="nugget-label-list",
    description="AutoNuggetizer nugget assignment: not_support 0, partial_support 1, support 2",
    system=NUGGETIZER_SYSTEM,
    template=(
        "Based on the query and passage, label each of the 1 nuggets either as support, partial_support, "
        "or not_support using the following criteria. A nugget that is fully captured in the passage should "
        "be labeled as support. A nugget that is partially captured in the passage should be labeled as "
        "partial_support. If the nugget is not captured at all, label it as not_support. Return the list of "
        "labels in a Pythonic list format (type: List[str]). The list should be in the same order as the "
        "input nuggets. Make sure to provide a label for each nugget.\n"
        "\n"
        "Search Query: {query}\n"
        "Passage: {context}\n"
        "Nugget List: {nugget}\n"
        "Only return the list of labels (List[str]). Do not explain.\n"
        "Labels:"
    ),
))

register(Prompt(
    id="citation-support",
    source=SUPPORT_SOURCE,
    target="nugget",
    mode="generate",
    labels=SUPPORT_LABELS,
    scale=(0, 2),
    parser="support-label",
    description="TREC 2024 RAG citation support: does the citation support the statement (0-2)",
    template=(
        "In this task, you will evaluate whether each statement is supported by its corresponding citations. "
        "Note that the system responses may appear very fluent and well-formed, but contain slight inaccuracies "
        "that are not easy to discern at first glance. Pay close attention to the text.\n"
        "\n"
        "You will be provided with a statement and its corresponding citation. It may be helpful to ask "
        "yourself whether it is accurate to say \"according to the citation\" with a statement following this "
        "phrase. Be sure to check all of the information in the statement. You will be given three options:\n"
        "\n"
        "- Full Support: All of the information in the statement is supported in the citation.\n"
        "\n"
        "- Partial Support: Some parts of the information are supported in the citation, but other parts are "
        "missing from the citation.\n"
        "\n"
        "- No Support: This citation does not support any part of the statement.\n"
        "\n"
        "Please provide your response based on the information in the citation. If you are unsure, use your "
        "best judgment. Respond as either \"full_support\", \"partial_support\", or \"no_support\" with no "
        "additional information.\n"
        "\n"
        "Statement: {item}\n"
        "\n"
        "Citation: {context}"
    ),
))
