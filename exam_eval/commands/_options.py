"""Option blocks that several commands share, defined once: the back-end flags of
exam-grade and exam-nuggets support, and their cache/shard/dry-run/output flags."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

import click
from click.core import ParameterSource

from ..backends.factory import split_backend_options
from ..errors import UsageError
from ._base import check_appended_output
from ._model_flags import (GRADE_REFUSES, SERVER_OPTIONS, cache_option, max_tokens_option, no_cache_option,
                           retries_option, role_option, temperature_option, text_options)

# what builds the back end (backends.factory.make_grader takes them as a dict)
BACKEND_OPTIONS = [
    role_option("--backend", "score"),
    role_option("--model", "score"),
    role_option("--device", "score"),
    role_option("--dtype", "score"),
    click.option("--engine", "engine_name", default=None, type=click.Choice(["auto", "torch", "ctranslate2"]),
                 help="hf-seq2seq, hf-causal: what runs the model; auto = ctranslate2 where installed for hf-seq2seq, "
                      "torch for hf-causal (torch with --dtype, ctranslate2 with --compute-type). [auto]"),
    click.option("--compute-type", default=None, metavar="TYPE",
                 help="--engine ctranslate2: int8 (CPU default; hf-causal: float32), int8_float32, int16 (closer to float32), float32; CUDA: bfloat16 (default), "
                      "float16, int8_float16, int8_bfloat16."),
    click.option("--recheck-margin", type=click.FloatRange(min=0), default=None, metavar="M",
                 help="--engine ctranslate2, scoring: regrade in float32 the pairs whose two best label logits are less "
                      "than M standard deviations (of the logits over the vocabulary) apart; 0 turns it off. "
                      "[0.2 for the int8 compute types, else 0]"),
    role_option("--batch-size", "score"),
    click.option("--max-input-tokens", type=click.IntRange(min=16), default=None, help="Model window; only the passage is cut to fit."),
    max_tokens_option(None, why="the back end's: 64 for a rating or a label", dest="max_new_tokens"),
    # the name exam-grade had: taken, with one notice, so that scripts go on working
    click.option("--max-new-tokens", "max_new_tokens_alias", type=click.IntRange(min=1), default=None, hidden=True,
                 callback=lambda ctx, param, value: _renamed(ctx, value, "--max-new-tokens", "--max-tokens")),
    retries_option(refused=GRADE_REFUSES["retries"]),
    temperature_option(refused=GRADE_REFUSES["temperature"]),
    click.option("--num-beams", type=click.IntRange(min=1), default=None, help="Beam search width for generation (default greedy)."),
    *SERVER_OPTIONS,
    click.option("--min-label-mass", type=click.FloatRange(min=0, max=1), default=None, metavar="M",
                 help="Scored prompts: a grade is read from the labels' probabilities only where the judge put at least "
                      "M of its first token's probability on them and its most probable token is a label; elsewhere "
                      "the answer is generated and read from its text. 0 reads the labels whatever the judge wrote "
                      "first. [0.5; see man exam-grade, JUDGES]"),
]

# how a grading run reads and writes: -O pairs, the cache, one shard, a dry run, the output
RUN_OPTIONS = [
    role_option("--backend-option", "score"),
    cache_option,
    no_cache_option,
    click.option("--shard", default=None, metavar="I/N", help="Grade only shard I of N (1-based; stable split by work key)."),
    click.option("--dry-run", is_flag=True, help="Report pool size, pairs, cache hits and estimated time; grade nothing."),
    click.option("--retry-unparsed", is_flag=True,
                 help="Resuming into -o: grade again the pairs whose last line there is unparsed (their new lines "
                      "are appended; readers take a pair's last line)."),
    click.option("-o", "--output", default=None, metavar="FILE", callback=check_appended_output,
                 help="Append grades to FILE (resumable; .gz ok; checked before any work). Default: stdout."),
]

def _renamed(ctx: click.Context, value, old: str, new: str):
    """An old flag name, still taken: one notice on stderr."""
    if value is not None and not ctx.resilient_parsing:
        click.echo(f"{ctx.command_path}: {old} is now {new} (the same limit in all four commands); taken", err=True)
    return value


# the keyword names BACKEND_OPTIONS give a command, as make_grader wants them
_SETTINGS = {"engine_name": "engine"}


@dataclass(frozen=True)
class JudgeFlags:
    """The back-end flags (BACKEND_OPTIONS) as the command receives them: one typed value.
    The server flags not given are None: their defaults are the endpoint back end's own,
    and a local back end refuses them only where they are given."""

    backend: str
    model: str | None
    device: str | None
    dtype: str | None
    engine_name: str | None
    compute_type: str | None
    recheck_margin: float | None
    batch_size: int | None
    max_input_tokens: int | None
    max_new_tokens: int | None
    max_new_tokens_alias: int | None
    num_beams: int | None
    base_url: str | None
    api_key_env: str | None
    concurrency: int | None
    timeout: float | None
    max_retries: int | None
    cache_any_server: bool | None
    min_label_mass: float | None

    def settings(self) -> dict:
        """Everything but the back end's name, keyed as backends.factory.make_grader takes it."""
        out = {_SETTINGS.get(f.name, f.name): getattr(self, f.name) for f in fields(self)
               if f.name not in ("backend", "max_new_tokens_alias")}
        if self.max_new_tokens_alias is not None:
            if self.max_new_tokens is not None:
                raise UsageError("--max-tokens and --max-new-tokens name one limit: give --max-tokens")
            out["max_new_tokens"] = self.max_new_tokens_alias
        return out


@dataclass(frozen=True)
class ModelFlags:
    """The model flags of a command whose back end writes text (_model_flags.text_options),
    as the command receives them; ``given``: those the command line gave (only they reach
    the client: the rest are its defaults, and a back end refuses only a flag given)."""

    backend: str
    model: str | None
    base_url: str | None
    api_key_env: str
    concurrency: int
    timeout: float
    max_retries: int
    cache_any_server: bool | None
    max_tokens: int
    backend_options: tuple[str, ...]
    script: str | None = None
    temperature: float = 0.0
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    given: frozenset = frozenset()

    def client_options(self) -> dict:
        """The flags given, keyed as backends.factory.make_client takes them (-O parsed)."""
        out = {name: getattr(self, name) for name in self.given if name != "backend"}
        if self.backend_options:
            out["backend_options"] = split_backend_options(self.backend_options)
        return out


@dataclass(frozen=True)
class RunFlags:
    """How a grading run reads and writes (RUN_OPTIONS), as the command receives them."""

    backend_options: tuple[str, ...]
    cache_path: str | None
    no_cache: bool
    shard: str | None
    dry_run: bool
    retry_unparsed: bool
    output: str | None


def grouped(options, group: type, keyword: str, unset_at_default: tuple[str, ...] = ()):
    """The options, and their values handed to the command as one ``group`` under
    ``keyword``, so that a command takes the block as one typed parameter; those of
    ``unset_at_default`` as None where the command line did not give them (a default, or
    the environment's). A group with a
    ``given`` field is told the names the command line gave."""
    names = [f.name for f in fields(group) if f.name != "given"]

    def decorate(f):
        @functools.wraps(f)  # keeps the options declared below this block (click's __click_params__)
        def command(*args, **params):
            values = {name: params.pop(name) for name in names if name in params}
            ctx = click.get_current_context()
            for name in unset_at_default:  # $OPENAI_BASE_URL is the endpoint's own default, not a flag given
                if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, ParameterSource.ENVIRONMENT):
                    values[name] = None
            if any(f.name == "given" for f in fields(group)):
                values["given"] = frozenset(name for name in values
                                            if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE)
            return f(*args, **{keyword: group(**values)}, **params)

        for option in reversed(options):  # click lists options in the order they are written
            command = option(command)
        return command
    return decorate


backend_flags = grouped(BACKEND_OPTIONS, JudgeFlags, "judge",
                         unset_at_default=("base_url", "api_key_env", "concurrency", "timeout", "max_retries"))
run_flags = grouped(RUN_OPTIONS, RunFlags, "run")


def model_flags(role: str):
    """The model flags of a command of text ``role`` (chat, complete), handed to it as one
    :class:`ModelFlags` under ``llm``."""
    return grouped(text_options(role), ModelFlags, "llm")
