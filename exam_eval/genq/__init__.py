"""Question and nugget bank generation (``exam-genq``): prompts, response parsing,
bank building, merging with human-edited banks, and importing other bank formats.
Uses io, the back ends and the grading prompts; imported only by commands and api."""
