"""Nugget prompts of the RUBRIC grading workbench (rubric-grading-workbench.txt, Table 2,
column "Nugget / Key Fact"; FLAN-T5 prompt classes NuggetSelfRatedPrompt and
NuggetExtractionPrompt).

nugget-selfrating   coverage of a key fact, 0-5.
nugget-extraction   extract the passage text that best relates to the key fact; recorded
                    for human inspection (grade only 0 when the model says it is absent).

Text fixes against the text file: the table cell is flattened by the text extraction to
``... Use this scale: - 5: Detailed, clear coverage 4: Sufficient coverage, ...``. The same
table's question cell is flattened identically (``- 5: ... accurate 4: ...``) while the
EXAM++ paper prints that question prompt unflattened as one ``- N: ... .`` line per grade.
We restore the nugget scale the same way: each grade on its own line with its ``- ``
bullet and closing period, a blank line before and after the list, as in EXAM++ Table 2.
Words, capitalisation (``Key Fact:``) and order are the paper's.
"""

from exam_eval.grading.prompts.base import SELF_RATING, Prompt, register

SOURCE = "RUBRIC workbench Table 2"

register(Prompt(
    id="nugget-selfrating",
    source=SOURCE,
    target="nugget",
    **SELF_RATING,
    description="self-rated coverage of a nugget (key fact), 0 (not mentioned) to 5",
    template=(
        "Given the context, evaluate the coverage of the specified key fact (nugget). Use this scale:\n"
        "\n"
        "- 5: Detailed, clear coverage.\n"
        "- 4: Sufficient coverage, minor omissions.\n"
        "- 3: Mentioned, some inaccuracies or lacks detail.\n"
        "- 2: Briefly mentioned, significant omissions or inaccuracies.\n"
        "- 1: Minimally mentioned, largely inaccurate.\n"
        "- 0: Not mentioned at all.\n"
        "\n"
        "Key Fact: {nugget} Context: {context}"
    ),
))

register(Prompt(
    id="nugget-extraction",
    source=SOURCE,
    target="nugget",
    mode="generate",
    labels=(),
    scale=(0, 1),
    parser="extraction",
    description="extract the text that mentions a nugget (for inspection)",
    template=(
        "Extract the passage from the text that best relates to the key fact (nugget), "
        "ensuring relevance and clarity. Key Fact: {nugget} Context: {context}"
    ),
))
