"""A topic's description and narrative are read where the topics have them (TREC topic
files, JSONL fields, ir_datasets queries that carry them), for the assessors' page."""

from __future__ import annotations

from collections import namedtuple

import pytest

from exam_eval.errors import InputError
from exam_eval.io import irds
from exam_eval.io.topics import read_topics


def test_trec_topics_keep_description_and_narrative(tmp_path):
    path = tmp_path / "t.trec"
    path.write_text("<top>\n<num> Number: 301\n<title> International Organized Crime\n\n<desc> Description:\n"
                    "Identify organizations that participate in international criminal\nactivity.\n\n"
                    "<narr> Narrative:\nA relevant document must as a minimum identify the organization.\n</top>\n"
                    "<top>\n<num> Number: 302\n<title> Poliomyelitis and Post-Polio\n</top>\n")
    topics = read_topics(path)
    assert topics["301"].text == "International Organized Crime"
    assert topics["301"].description == "Identify organizations that participate in international criminal activity."
    assert topics["301"].narrative == "A relevant document must as a minimum identify the organization."
    assert (topics["302"].description, topics["302"].narrative) == ("", "")


def test_jsonl_topics_take_description_and_narrative_as_strings(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"query_id": "1", "text": "q", "description": "what is  wanted", "narrative": "what counts"}\n'
                    '{"query_id": "2", "text": "r"}\n')
    topics = read_topics(path)
    assert (topics["1"].description, topics["1"].narrative) == ("what is wanted", "what counts")
    assert topics["2"].description == ""
    path.write_text('{"query_id": "1", "text": "q", "narrative": 3}\n')
    with pytest.raises(InputError, match=r"t.jsonl:1: 'narrative' must be a string"):
        read_topics(path)


def test_ir_datasets_queries_give_their_description_and_narrative(monkeypatch):
    TrecQuery = namedtuple("TrecQuery", "query_id title description narrative")

    class Dataset:
        def has_queries(self):
            return True

        def queries_iter(self):
            yield TrecQuery("301", "International Organized Crime", "Identify organizations.", "A relevant one ...")

    monkeypatch.setattr(irds, "load_dataset", lambda spec: Dataset())
    monkeypatch.setattr(irds, "looks_like_irds_id", lambda spec: True)
    import exam_eval.io.topics as topics_module

    monkeypatch.setattr(topics_module, "looks_like_irds_id", lambda spec: True)
    topics = read_topics("disks45/nocr/trec-robust-2004")
    assert topics["301"].text == "International Organized Crime"
    assert (topics["301"].description, topics["301"].narrative) == ("Identify organizations.", "A relevant one ...")
    assert irds.irds_queries("x") == {"301": "International Organized Crime"}   # the plain form is unchanged
