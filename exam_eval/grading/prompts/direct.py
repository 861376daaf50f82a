"""Direct relevance-label prompts (exam-plusplus.txt, Appendix A "Relevance Label Predictor
Prompts"): no bank item, the passage is graded against the query.

sun, sun-few, faggioli-b, faggioli-b-few, helm   "Yes"/"No" -> 1/0
thomas                                            0-2 (the paper's abridged Thomas prompt)

Text fixes against the text file: the markdown escape in ``{query\\_title}`` is removed,
and the paper's ``{query_title}`` placeholder is our ``{query}``. FaggioliB prints it as
``{query title}`` (the underscore lost in typesetting); it is the same placeholder.
Line structure is the text file's (a blank line is a paragraph break of the paper).

Sun_few is described, not printed: "Prompt Sun with the same few shot examples as
FaggioliB_few". We build it as Sun's instruction paragraph followed by FaggioliB_few's
text after its instruction (the four examples and the closing Question/Passage/Answer
block), unchanged.
"""

from exam_eval.grading.prompts.base import Prompt, register

SOURCE = "EXAM++ Appendix A"

_ANSWER = "\n\nAnswer:"

FAGGIOLI_B_INSTRUCTION = (
    "Instruction: Indicate if the passage is relevant for the question. Respond with 'Yes' or 'No'."
)
SUN_INSTRUCTION = (
    "Instruction: Given a passage and a query, predict whether the passage includes an answer "
    'to the query by producing either "Yes" or "No".'
)

# Four TREC DL examples of FaggioliB_few, printed in the paper as Passage/Question/Answer
# paragraphs; the typos and the em dash are the paper's.
FEW_SHOT_EXAMPLES = (
    "Passage: Its 25 drops per ml, you guys are all wrong. If it is water, the standard was "
    "changed 15 - 20 years ago to make 20 drops = 1mL. The viscosity of most things is "
    "temperature dependent, so this would be at room temperature. Hope this helps.\n"
    "\n"
    "Question: how many eye drops per ml\n"
    "\n"
    "Answer: Yes\n"
    "\n"
    "Passage: RE: How many eyedrops are there in a 10 ml bottle of Cosopt? My Kaiser pharmacy "
    "insists that 2 bottles should last me 100 days but I run out way before that time when I "
    "am using 4 drops per day. In the past other pharmacies have given me 3 10-ml bottles for "
    "100 days. E: How many eyedrops are there in a 10 ml bottle of Cosopt? My Kaiser pharmacy "
    "insists that 2 bottles should last me 100 days but I run out way before that time when I "
    "am using 4 drops per day.\n"
    "\n"
    "Question: how many eye drops per ml\n"
    "\n"
    "Answer: No\n"
    "\n"
    "Passage: You can transfer money to your checking account from other Wells Fargo. accounts "
    "through Wells Fargo Mobile Banking with the mobile app, online, at any. Wells Fargo ATM, "
    "or at a Wells Fargo branch. 1 Money in \u2014 deposits.\n"
    "\n"
    "Question: can you open a wells fargo account online\n"
    "\n"
    "Answer: No\n"
    "\n"
    "Passage: You can open a Wells Fargo banking account from your home or even online. It is "
    "really easy to do, provided you have all of the appropriate documentation. Wells Fargo has "
    "so many bank account options that you will be sure to find one that works for you. They "
    "offer free checking accounts with free online banking.\n"
    "\n"
    "Question: can you open a wells fargo account online\n"
    "\n"
    "Answer: Yes"
)
FEW_SHOT_QUERY = "Question: {query}\nPassage: {context}" + _ANSWER


def _yes_no(id: str, description: str, template: str) -> Prompt:
    return register(Prompt(
        id=id,
        source=SOURCE,
        target="direct",
        mode="score",
        labels=("No", "Yes"),
        scale=(0, 1),
        parser="yesno",
        description=description,
        template=template,
    ))


_yes_no("sun", "Sun et al.: does the passage include an answer to the query, Yes/No",
        SUN_INSTRUCTION + "\n\nQuestion: {query} Passage: {context}" + _ANSWER)
_yes_no("sun-few", "Sun with the four TREC DL examples of FaggioliB_few, Yes/No",
        SUN_INSTRUCTION + "\n\n" + FEW_SHOT_EXAMPLES + "\n\n" + FEW_SHOT_QUERY)
_yes_no("faggioli-b", "Faggioli et al. (TREC DL): is the passage relevant, Yes/No",
        FAGGIOLI_B_INSTRUCTION + "\n\nQuestion: {query}\n\nPassage: {context}" + _ANSWER)
_yes_no("faggioli-b-few", "FaggioliB with four TREC DL few-shot examples, Yes/No",
        FAGGIOLI_B_INSTRUCTION + "\n\n" + FEW_SHOT_EXAMPLES + "\n\n" + FEW_SHOT_QUERY)
_yes_no("helm", "HELM: does the passage answer the query, Yes/No",
        "Instruction: Does the passage answer the query?\n\n"
        "Respond with 'Yes' or 'No'. Question: {query} Passage: {context}" + _ANSWER)

register(Prompt(
    id="thomas",
    source=SOURCE,
    target="direct",
    mode="score",
    labels=("0", "1", "2"),
    scale=(0, 2),
    parser="thomas",
    description="Thomas et al., abridged: search quality rater, 0-2",
    template=(
        "Instruction: You are a search quality rater evaluating the relevance of passages. "
        "Given a query and a passages, you must provide a score on an integer scale of 0 to 2 "
        "with the following meanings:\n"
        "\n"
        "2 = highly relevant, very helpful for this query\n"
        "\n"
        "1 = relevant, may be partly helpful but might contain other irrelevant content\n"
        "\n"
        "0 = not relevant, should never be shown for this query\n"
        "\n"
        "Question: {query} Passage: {context}" + _ANSWER
    ),
))
