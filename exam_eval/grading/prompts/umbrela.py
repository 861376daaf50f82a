"""UMBRELA (umbrela.txt, Figure 1): relevance 0-3 with a "##final score: N" answer.

Text fixes against the text file: the figure is a minted listing; its option line
(``[fontsize=, frame=lines, ...]text``) is typesetting, not prompt. The placeholders are
printed through minted's escape as plain ``query`` and ``passage``
(``Query: query Passage: passage``); they are ``{query}`` and ``{context}`` here.
Paragraphs are the figure's four paragraphs, separated by blank lines as in the text file.

Decoding (Section 3, "following the parameter configurations provided in Thomas et al."):
temperature 0, top_p 1, no stop words, frequency penalty 0.5, presence penalty 0. The
endpoint back end sends them; hf-causal applies temperature 0 as greedy decoding and the
penalties as OpenAI defines them (each generated token's logit lowered by 0.5 times the
number of times it was already generated); other back ends decode greedily.
"""

from exam_eval.grading.prompts.base import Prompt, register

PUBLISHED_DECODING = (("temperature", 0.0), ("top_p", 1.0), ("frequency_penalty", 0.5), ("presence_penalty", 0.0))

register(Prompt(
    id="umbrela",
    source="UMBRELA Figure 1",
    target="direct",
    mode="generate",
    labels=(),
    scale=(0, 3),
    parser="umbrela",
    description="UMBRELA (Bing relevance assessor reproduction), 0-3, answer '##final score: N'",
    decoding=PUBLISHED_DECODING,
    template=(
        "Given a query and a passage, you must provide a score on an integer scale of 0 to 3 "
        "with the following meanings: 0 = represent that the passage has nothing to do with the "
        "query, 1 = represents that the passage seems related to the query but does not answer "
        "it, 2 = represents that the passage has some answer for the query, but the answer may "
        "be a bit unclear, or hidden amongst extraneous information and 3 = represents that the "
        "passage is dedicated to the query and contains the exact answer.\n"
        "\n"
        "Important Instruction: Assign category 1 if the passage is somewhat related to the "
        "topic but not completely, category 2 if passage presents something very important "
        "related to the entire topic but also has some extra information and category 3 if the "
        "passage only and entirely refers to the topic. If none of the above satisfies give it "
        "category 0.\n"
        "\n"
        "Query: {query} Passage: {context}\n"
        "\n"
        "Split this problem into steps: Consider the underlying intent of the search. Measure "
        "how well the content matches a likely intent of the query (M). Measure how trustworthy "
        "the passage is (T). Consider the aspects above and the relative importance of each, "
        "and decide on a final score (O). Final score must be an integer value only. Do not "
        "provide any code in result. Provide each score in the format of: ##final score: score "
        "without providing any reasoning."
    ),
))
