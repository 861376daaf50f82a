"""Model back ends behind one interface (see :mod:`exam_eval.backends.base`), and the
grader a command's flags ask for (:mod:`exam_eval.backends.factory`). Built on
exam_eval.grading's types and prompts; imported by genq, api and the commands, never by
the grading engine (it needs only :class:`exam_eval.grading.types.Grader`)."""

from exam_eval.backends.base import Backend, PromptBackend
from exam_eval.backends.factory import get_backend, make_client
from exam_eval.backends.registry import CLIENTS, register
from exam_eval.grading.types import FAILED, GradeRequest, GradeResult

# the package's interface: a back end, its registry, and the request and result types it takes and gives
__all__ = ["CLIENTS", "FAILED", "Backend", "GradeRequest", "GradeResult", "PromptBackend", "get_backend",
           "make_client", "register"]
