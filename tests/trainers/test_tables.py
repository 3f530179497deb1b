"""The built-in `tables` corpus: real reference data from installed wheels, the same documents for a seed on
any machine, readable with the network cut, each document whole within the designer's chunk budget."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

from trainers.config import load_config
from trainers.corpus import Corpus, approximate_tokens, open_source
from trainers.tables import MINIMUM_ROWS, SAMPLE_ROWS, TablesSource

# Draws in a fresh interpreter whose sockets all refuse: the corpus must come from the installed wheels alone.
_OFFLINE_DRAWS = """
import json, random, socket, sys
def refuse(*args, **kwargs):
    raise OSError("network used")
socket.socket = refuse
socket.create_connection = refuse
from trainers.corpus import Corpus, open_source
corpus = Corpus(open_source("tables"), max_tokens=400)
rng = random.Random(int(sys.argv[1]))
print(json.dumps([corpus.sample(rng).__dict__ for _ in range(5)]))
"""


def _offline_draws(seed: int) -> list[dict[str, str]]:
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE_DRAWS, str(seed)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    drawn: list[dict[str, str]] = json.loads(done.stdout)
    return drawn


def test_the_tables_corpus_draws_the_same_documents_for_a_seed_offline() -> None:
    first, again, other = _offline_draws(3), _offline_draws(3), _offline_draws(4)
    assert first == again and first != other
    here = Corpus(open_source("tables"), max_tokens=400)
    rng = random.Random(3)
    assert [here.sample(rng).__dict__ for _ in range(5)] == first  # and the same in this process


def test_each_document_is_a_described_table_with_a_sample_of_its_rows() -> None:
    source = TablesSource()
    kinds = Counter(source.document(i).title.split(" of ")[0] for i in range(len(source)))
    assert set(kinds) == {"Airports", "Cities", "Countries", "Currencies", "Counties"}
    assert len(source) > 300 and min(kinds.values()) >= 7
    for index in range(len(source)):
        document = source.document(index)
        header, *rows = document.text.split("\n\n")[-1].splitlines()
        columns = header.split(" | ")
        assert all(column.isidentifier() and column.islower() for column in columns), header  # copyable names
        assert MINIMUM_ROWS <= len(rows) <= SAMPLE_ROWS and all(len(row.split(" | ")) == len(columns) for row in rows)
        assert approximate_tokens(document.text) <= 400, document.source  # whole in the CPU preset's chunk
    lisbon = next(source.document(i) for i in range(len(source)) if source.document(i).title == "Airports of Portugal")
    assert "iata | name | city | region | elevation_ft | timezone" in lisbon.text and "Europe/Lisbon" in lisbon.text


def test_draws_are_uniform_over_tables() -> None:
    corpus = Corpus(TablesSource(), max_tokens=400)
    draws = Counter(corpus.sample(random.Random(seed)).source for seed in range(20 * len(corpus.source)))
    assert len(draws) > 0.95 * len(corpus.source) and max(draws.values()) < 60  # ~20 each


def test_tables_is_the_default_corpus_and_python_docs_stays_selectable() -> None:
    assert load_config("cpu-tiny").designer.corpus == "tables"
    assert load_config("cpu-tiny", ["designer.corpus=python-docs"]).designer.corpus == "python-docs"
    assert open_source("python-docs").name == "python-docs"
