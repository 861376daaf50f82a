"""Model back ends behind one interface (see :mod:`exam_eval.backends.base`)."""

from exam_eval.backends.base import (  # noqa: F401
    BACKENDS,
    FAILED,
    Backend,
    GradeRequest,
    GradeResult,
    PromptBackend,
    backend_class,
    get_backend,
    register,
)
