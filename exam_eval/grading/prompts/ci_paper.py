"""Prompts of the confidence-interval paper (confidence-intervals-ppi-crc.txt, Appendix A,
Listings 1 and 2), written for Flan-UL2 in scoring mode.

ci-dl         TREC-DL four-point scale; scored suffixes "0" "1" "2" "3" (as the paper says).
ci-robust04   Robust04 three-point scale; scored suffixes "[0]" "[1]" "[2]" (the paper found
              the bracketed suffixes more effective there).

The paper's ``{passage}``/``{document}`` placeholders are our ``{context}``. Both listings
end with a ``Relevance:`` line (the last line of the text file is Listing 2's); the
scored label follows it.
"""

from exam_eval.grading.prompts.base import Prompt, register

SOURCE = "CI paper Appendix A"

register(Prompt(
    id="ci-dl",
    source=SOURCE + " Listing 1",
    target="direct",
    mode="score",
    labels=("0", "1", "2", "3"),
    scale=(0, 3),
    parser="rating",
    description="TREC-DL human-assessor scale 0-3",
    template=(
        "Assess the relevance of the passage to the query on a four-point scale:\n"
        "[0] Irrelevant: The passage has nothing to do with the query.\n"
        "[1] Related: The passage seems related to the query but does not answer it.\n"
        "[2] Highly relevant: The passage has some answer for the query, but the answer may be "
        "a bit unclear, or hidden amongst extraneous information.\n"
        "[3] Perfectly relevant: The passage is dedicated to the query and contains the exact answer.\n"
        "Query: {query}\n"
        "Passage: {context}\n"
        "Relevance:"
    ),
))

register(Prompt(
    id="ci-robust04",
    source=SOURCE + " Listing 2",
    target="direct",
    mode="score",
    labels=("[0]", "[1]", "[2]"),
    scale=(0, 2),
    parser="rating",
    description="Robust04 human-assessor scale 0-2",
    template=(
        "Assess the relevance of the document to the query on a three-point scale:\n"
        "[0] Not relevant: The document is not relevant to the query.\n"
        "[1] Relevant: Parts of the document may be relevant to the query.\n"
        "[2] Highly Relevant: The document is highly relevant to the query.\n"
        "Query: {query}\n"
        "Document: {context}\n"
        "Relevance:"
    ),
))
