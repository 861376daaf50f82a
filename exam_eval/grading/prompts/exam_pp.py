"""EXAM++ grading prompts (exam-plusplus.txt, Table 2).

question-selfrating   "Self-rating Answerability Prompt" (0-5). Identical in wording to the
                      RUBRIC workbench's QuestionSelfRatedUnanswerablePromptWithChoices.
question-extraction   "Question Answering Prompt": a complete-and-concise answer, verified
                      against the answer key (answer_check.matches) or by answer-verification.
                      Also the original EXAM (FLAN-T5) paper's question answering prompt.
answer-verification   "Optional: Answer Verification Prompt": yes/no.

Text fixes against the text file: the markdown escape in ``{correct\\_answer}`` is
removed (``{correct_answer}``). Line structure is the text file's: the instruction, a
blank line, the six choice lines, a blank line, then ``Question: ... Context: ...`` on one
line (as in both papers).
"""

from exam_eval.grading.prompts.base import SELF_RATING, Prompt, register

SOURCE = "EXAM++ Table 2"

register(Prompt(
    id="question-selfrating",
    source=SOURCE,
    target="question",
    **SELF_RATING,
    description="self-rated answerability of an exam question, 0 (worst) to 5 (best)",
    template=(
        "Can the question be answered based on the available context? choose one:\n"
        "\n"
        "- 5: The answer is highly relevant, complete, and accurate.\n"
        "- 4: The answer is mostly relevant and complete but may have minor gaps or inaccuracies.\n"
        "- 3: The answer is partially relevant and complete, with noticeable gaps or inaccuracies.\n"
        "- 2: The answer has limited relevance and completeness, with significant gaps or inaccuracies.\n"
        "- 1: The answer is minimally relevant or complete, with substantial shortcomings.\n"
        "- 0: The answer is not relevant or complete at all.\n"
        "\n"
        "Question: {question} Context: {context}"
    ),
))

register(Prompt(
    id="question-extraction",
    source=SOURCE,
    target="question",
    mode="generate",
    labels=(),
    scale=(0, 1),
    parser="extraction",
    needs_verification=True,
    description="extract a complete and concise answer; 1 when it matches the answer key",
    template=(
        "provide a complete and concise answer to the question based on the context. "
        "Question: {question} Context: {context}"
    ),
))

register(Prompt(
    id="answer-verification",
    source=SOURCE,
    target="question",
    mode="score",
    labels=("no", "yes"),
    scale=(0, 1),
    parser="yesno",
    description="LLM check of an extracted {answer} against the answer key {correct_answer}",
    template=(
        'For the question "{question}" the correct answer is "{correct_answer}". '
        'Is "{answer}" an equally correct response to this question? Answer yes or no.'
    ),
))
