"""The README's five-minute tour: only data a user can get (no paths of this project's
development setup), and the numbers it shows are what the commands print on that data
(checked on the copies in ../shared/data, skipped without them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tour() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Five-minute tour")
    return text[start:text.index("\n## ", start + 1)]


def test_tour_names_only_data_a_user_has():
    t = tour()
    assert "../shared" not in t and "shared/data" not in t
    assert "msmarco-passage/trec-dl-2019/judged" in t  # an ir_datasets ID
    assert "https://" in t  # where the downloaded files come from


def test_tour_numbers_hold_on_the_same_public_data(shared_data, run_cli):
    t = tour()
    dl19 = shared_data / "dl19"
    # exam-qrels $GRADES: as many lines as the tour says
    lines = int(re.search(r"# ([\d,]+) lines", t).group(1).replace(",", ""))
    r = run_cli("exam-qrels", dl19 / "graded-flan-t5-large.jsonl.gz")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == lines
    # the trec_eval line it shows, and that it is the run's official score
    shown = re.search(r"#\s+(ndcg_cut_10\s+\tall\t[\d.]+)", t).group(1)
    r = run_cli("exam-qrels", "-c", "-m", "ndcg_cut.10", dl19 / "qrels.txt", dl19 / "runs" / "idst_bert_p1.run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == shown
    official = {row.split("\t")[0]: row.split("\t") for row in (dl19 / "official.tsv").read_text().splitlines()}
    column = official["run"].index("ndcg_cut_10")
    assert shown.endswith("\t" + official["idst_bert_p1"][column])


def test_the_commands_are_put_on_path_before_a_block_calls_them_by_name():
    """A newcomer types the blocks as written: exam-* by name got status 127 until a step
    put .venv/bin on PATH, and that step comes before the first block that needs it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    step = text.index('export PATH="$PWD/.venv/bin:$PATH"')
    bare = re.compile(r"^(?:[A-Z_]+=\S+ )*(exam-[a-z]+|python) ", re.M)
    blocks = [m for m in re.finditer(r"^```(?:sh)?\n(.*?)^```", text, re.S | re.M) if bare.search(m.group(1))]
    assert len(blocks) >= 5
    assert all(m.start() > step for m in blocks), [m.group(1)[:80] for m in blocks if m.start() < step]


def test_make_test_installs_nothing_into_the_system():
    import shutil
    import subprocess

    import pytest

    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    r = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "pytest" in r.stdout and "apt-get" not in r.stdout
    r = subprocess.run(["make", "-n", "system-deps"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "apt-get" in r.stdout  # the step the README names for it
    assert "make system-deps" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_torch_index_reaches_pip_as_the_readme_says(tmp_path):
    """A plain install lets pip choose torch's build (CUDA from PyPI); TORCH_INDEX, the one
    switch the README gives CPU-only users, reaches pip as an extra index (a URL) or as a
    place to find wheels (a folder), for the one pip call that installs torch."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")

    def torch_install(*var: str) -> str:
        r = subprocess.run(["make", "-n", "-B", "install", *var], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        (line,) = [x for x in r.stdout.splitlines() if "pip install" in x and "[all]" in x]
        return line

    assert "--extra-index-url" not in torch_install() and "--find-links" not in torch_install()
    url = "https://download.pytorch.org/whl/cpu"
    assert f"--extra-index-url {url} " in torch_install(f"TORCH_INDEX={url}")
    assert f"--find-links {tmp_path} " in torch_install(f"TORCH_INDEX={tmp_path}")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"make demo TORCH_INDEX={url}" in readme
    # the pin the README names is constraints.txt's, and the CPU wheel it promises matches it
    (pin,) = re.findall(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert f"`torch=={pin}`" in readme and f"`torch {pin}+cpu`" in readme
