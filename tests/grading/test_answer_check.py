"""Answer-key verification (EXAM paper 3.2.2): hand-worked examples on both sides of the
20% boundary, and the edit distance checked against a direct O(n*m) Levenshtein loop."""

from __future__ import annotations

import pytest

from exam_eval.grading.answer_check import distance, matches, normalize, normalized_string, stopwords


def levenshtein(a: str, b: str) -> int:
    """Independent reference: the textbook dynamic programme."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_stopword_list_is_shipped():
    words = stopwords()
    assert len(words) == 179
    assert {"the", "a", "of", "is", "don't", "wouldn't", "ourselves"} <= words
    assert not {"skin", "water", "vaccine", "#"} & words


def test_normalize_hand_worked():
    # the/is/of are stop words; Porter strips the plural "s" of "epidermis" (step 1a).
    assert normalize("The Epidermis is the outer layer of the skin.") == ["epidermi", "outer", "layer", "skin"]
    # "rising" -> step 1b drops "ing" -> "ris" -> CVC, m=1 -> add "e" -> "rise".
    assert normalize("rising") == ["rise"] == normalize("rise")
    # Stop words with apostrophes are one token, also with the typographic apostrophe.
    assert normalize("It\u2019s running, don't stop!") == ["run", "stop"]
    assert normalize("the of and") == []
    assert normalize("") == []
    assert normalized_string("Outer layers, of THE skin") == "outer layer skin"


@pytest.mark.parametrize("a, b", [
    ("the epidermis", "epidermal layer"),
    ("During very wet times, the water table will rise.", "rise"),
    ("increase substantially", "rising"),
    ("photosynthesis in plants", "Photosynthetic plants"),
    ("", "anything"),
])
def test_distance_is_levenshtein_on_the_normalised_strings(a, b):
    na, nb = normalized_string(a), normalized_string(b)
    assert distance(a, b) == (levenshtein(na, nb), max(len(na), len(nb)))


def test_boundary_digits():
    # Digits are not stemmed and not stop words: the strings compared are exactly these.
    key = "1234567890"  # longer string 10 characters: a match needs distance < 2.0
    assert matches("1234567890", [key])  # distance 0
    assert matches("1234567899", [key])  # distance 1 < 2
    assert not matches("1234567999", [key])  # distance 2, not < 2: the boundary itself fails
    assert matches("123456789", [key])  # one deletion; longer string is the key (10)
    assert not matches("12345678", [key])  # two deletions
    # Longer string 15 -> threshold 3.0: distance 2 matches, 3 does not.
    key15 = "123456789012345"
    assert matches("123456789012300", [key15])
    assert not matches("123456789012000", [key15])


def test_boundary_words_hand_worked():
    # key "epidermis" -> "epidermi" (8 characters): threshold 1.6.
    assert matches("epiderm", ["epidermis"])  # "epiderm": one deletion
    assert matches("the epidermas", ["epidermis"])  # "epiderma": one substitution
    assert not matches("dermis", ["epidermis"])  # "dermi": three deletions
    # Stop words and stems make phrasing differences vanish.
    assert matches("The outer layers of the skin", ["outer layer skin"])
    assert matches("rising", ["rise"])
    # "water tabl rose" vs "water tabl rise" (Porter: table -> tabl; 15 characters each):
    # one substitution < 3.0.
    assert matches("the water table rose", ["the water table will rise"])
    assert not matches("increase", ["rise"])  # an equally correct answer that lexical matching misses


def test_any_key_and_edge_cases():
    assert matches("epidermis", ["dermis", "epidermis"])
    assert not matches("epidermis", [])
    assert matches("epidermis", "epidermis")  # a single key given as a string
    assert not matches("the of", ["the"])  # both normalise to "": never a match
    assert not matches("", ["epidermis"])
