"""Published prompts for test bank generation, in a registry keyed by family, style, kind.

Families:

- ``workbench`` (default): Table 1 of the RUBRIC workbench paper (Dietz, "A Workbench for
  Autograding Retrieve/Generate Systems", SIGIR 2024). TREC DL and TREC CAR Y3 prompts for
  exam questions and nuggets; "the instruction to respond in valid JSON is appended".
- ``exam``: Table 1 of the EXAM answerability paper (Farzi & Dietz, "An Exam-based
  Evaluation Approach Beyond Traditional Relevance Judgments", ICTIR 2024); questions only,
  the answer is requested as a Python list.

The texts are reproduced as published. What was repaired (PDF extraction artefacts only):

- The EXAM paper's typographic quotes (’) around the placeholders are straight quotes ('),
  as in the workbench paper's rendering of the same prompts.
- The workbench table prints only the nugget cell of the "Instruction" row; its question
  cell is empty in the extracted text. The question instruction is the nugget one with
  "question"/"questions"/"question_text" substituted, which is what the workbench software
  released with the paper sends.
- The instruction's list reads ``[nugget_text_1, nugget_text_2,]`` in the extracted text;
  the dropped ellipsis is restored (``[nugget_text_1, nugget_text_2, ...]``), and the code
  fence gets its line breaks back (a table cell flattens them; a fence on one line is not a
  fence).

``{n}`` stands for the published "10" in the DL prompts, so ``--n`` can change it; the
default renders the published text. The CAR prompts state no count.

Adding a prompt: one :class:`GenPrompt` plus one :func:`register` call.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import UsageError

STYLES = ("dl", "car")
_PLACEHOLDER = re.compile(r"\{(query_text|query_title|query_subtopic|n)\}")
KINDS = ("question", "nugget")

WORKBENCH_QUESTION_INSTRUCTION = (
    "Give the question set in the following JSON format:\n"
    "```json\n"
    '{ "questions" : [question_text_1, question_text_2, ...]}\n'
    "```"
)
WORKBENCH_NUGGET_INSTRUCTION = (
    "Give the nugget set in the following JSON format:\n"
    "```json\n"
    '{ "nuggets" : [nugget_text_1, nugget_text_2, ...]}\n'
    "```"
)


@dataclass(frozen=True)
class GenPrompt:
    family: str
    style: str
    kind: str
    template: str  # placeholders: {query_text} (dl); {query_title}, {query_subtopic} (car); {n}
    instruction: str = ""  # appended after one space (the workbench's JSON instruction)
    field: str = ""  # JSON key the instruction asks for ("questions" / "nuggets")
    source: str = ""

    @property
    def name(self) -> str:
        return f"{self.family}-{self.style}-{self.kind}"

    @property
    def identity(self) -> str:
        """The prompt's name and a digest of its text (a batch file's grader)."""
        import hashlib

        text = "\x00".join((self.template, self.instruction, self.field))
        return f"{self.name}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"

    def render(self, *, query_text: str = "", query_title: str = "", query_subtopic: str = "",
               n: int = 10) -> str:
        # one regex pass, not str.format or chained replace: a query may itself contain
        # braces or a placeholder name, which must stay literal
        values = {"query_text": query_text, "query_title": query_title, "query_subtopic": query_subtopic,
                  "n": str(n)}
        text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.template)
        if self.instruction:
            text = text + " " + self.instruction
        return text

    @property
    def hash(self) -> str:
        return hashlib.sha256((self.template + "\x00" + self.instruction).encode()).hexdigest()[:12]


PROMPTS: dict[tuple[str, str, str], GenPrompt] = {}


def register(prompt: GenPrompt) -> None:
    PROMPTS[(prompt.family, prompt.style, prompt.kind)] = prompt


def families() -> list[str]:
    return sorted({f for f, _, _ in PROMPTS})


def get_prompt(family: str, style: str, kind: str) -> GenPrompt:
    try:
        return PROMPTS[(family, style, kind)]
    except KeyError:
        have = ", ".join(sorted(f"{f}/{s}/{k}" for f, s, k in PROMPTS))
        raise UsageError(f"no generation prompt for family {family!r}, style {style!r}, kind {kind!r} "
                         f"(available: {have})") from None


_WB = "RUBRIC workbench paper, Table 1"
_EXAM = "EXAM answerability paper, Table 1"

register(GenPrompt(
    "workbench", "dl", "question",
    "Break the query '{query_text}' into concise questions that must be answered. "
    "Generate {n} concise insightful questions that reveal whether information relevant for "
    "'{query_text}' was provided, showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level inquiries. Keep the questions short.",
    WORKBENCH_QUESTION_INSTRUCTION, "questions", _WB))
register(GenPrompt(
    "workbench", "dl", "nugget",
    "Break the query '{query_text}' into concise nuggets that must be mentioned. "
    "Generate {n} concise insightful nuggets that reveal whether information relevant for "
    "'{query_text}' was provided, showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level nuggets. Keep nuggets to a maximum of 4 words.",
    WORKBENCH_NUGGET_INSTRUCTION, "nuggets", _WB))
register(GenPrompt(
    "workbench", "car", "question",
    "Explore the connection between '{query_title}' with a specific focus on the subtopic "
    "'{query_subtopic}'. Generate insightful questions that delve into advanced aspects of "
    "'{query_subtopic}', showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level inquiries.",
    WORKBENCH_QUESTION_INSTRUCTION, "questions", _WB))
register(GenPrompt(
    "workbench", "car", "nugget",
    "Explore the connection between '{query_title}' with a specific focus on the subtopic "
    "'{query_subtopic}'. Generate insightful nuggets (key facts) that delve into advanced "
    "aspects of '{query_subtopic}', showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level nuggets. Keep nuggets to a maximum of 4 words.",
    WORKBENCH_NUGGET_INSTRUCTION, "nuggets", _WB))
register(GenPrompt(
    "exam", "dl", "question",
    "Break the query '{query_title}' into concise questions that must be answered. "
    "Generate {n} concise insightful questions that reveal whether information relevant for "
    "'{query_title}' was provided, showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level inquiries. Keep the questions short and in a Python "
    "list format.",
    "", "questions", _EXAM))
register(GenPrompt(
    "exam", "car", "question",
    "Explore the connection between '{query_title}' with a specific focus on the subtopic "
    "'{query_subtopic}'. Generate insightful questions that delve into advanced aspects of "
    "'{query_subtopic}', showcasing a deep understanding of the subject matter. "
    "Avoid basic or introductory-level inquiries. Give the question set in a Python list format.",
    "", "questions", _EXAM))
