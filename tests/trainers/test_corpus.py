"""Grounding corpora: every source type from real files, the chunk budget, uniform draws, clear errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainers.corpus import (
    Corpus,
    JsonLinesSource,
    ParquetSource,
    PythonDocsSource,
    approximate_tokens,
    chunk,
    open_source,
)
from trainers.documents import CorpusError, Document

PAGES = {f"page{i}": f"Page {i} opens here.\n\n" + f"Body of page {i}. " * 10 for i in range(4)}


def test_chunks_respect_the_budget_and_keep_every_word() -> None:
    text = "\n\n".join(["short paragraph"] * 5 + ["word " * 400, "x" * 3000])
    pieces = chunk(text, max_tokens=100)
    assert len(pieces) > 5 and all(approximate_tokens(piece) <= 100 for piece in pieces)
    assert "".join(pieces).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    assert chunk("one small document", max_tokens=100) == ["one small document"]


def test_jsonl_parquet_and_folder_sources_read_the_same_documents(tmp_path: Path) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"title": t, "text": x}) + "\n\n" for t, x in PAGES.items()))
    parquet = tmp_path / "docs.parquet"
    table = pa.table({"title": list(PAGES), "body": list(PAGES.values())})
    pq.write_table(table, parquet, row_group_size=3)  # two row groups
    folder = tmp_path / "pages"
    folder.mkdir()
    for title, text in PAGES.items():
        (folder / f"{title}.md").write_text(text)
    (folder / "image.png").write_bytes(b"\x89PNG")
    sources = [open_source(str(jsonl)), ParquetSource(parquet, text_field="body"), open_source(str(folder))]
    for source in sources:
        assert len(source) == 4
        assert sorted(source.document(i).text for i in range(4)) == sorted(PAGES.values())
    assert ParquetSource(parquet, text_field="body").document(3).title == "page3"  # second row group


def test_draws_are_uniform_over_documents_and_reproducible(tmp_path: Path) -> None:
    folder = tmp_path / "pages"
    folder.mkdir()
    for title, text in PAGES.items():
        (folder / f"{title}.txt").write_text(text * (1 + 20 * (title == "page0")))  # page0 is 21x longer
    corpus = Corpus(open_source(str(folder)), max_tokens=60)
    draws = Counter(corpus.sample(random.Random(seed)).title for seed in range(4000))
    assert all(800 <= n <= 1200 for n in draws.values()), draws  # ~1000 each, whatever the length
    first = [corpus.sample(random.Random(7)) for _ in range(2)]
    assert first[0] == first[1]
    assert "#chunk" in next(
        d.source for d in (corpus.sample(random.Random(s)) for s in range(50)) if d.title == "page0"
    )


def test_python_docs_corpus_is_pythons_own_documentation() -> None:
    source = PythonDocsSource()
    names = {source.document(i).source for i in range(len(source))}
    assert len(source) > 200
    assert "pydoc:assignment" in names and "stdlib:json" in names
    assert not any("site-packages" in name or "spadework" in name for name in names)
    text = next(source.document(i).text for i in range(len(source)) if source.document(i).source == "stdlib:json")
    assert "JSON" in text


def test_bad_sources_are_named_with_where(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine"}\n{"text": \n{"body": "no text"}\n')
    source = JsonLinesSource(broken)
    with pytest.raises(CorpusError, match=r"broken.jsonl, document 2: not valid JSON"):
        source.document(1)
    with pytest.raises(CorpusError, match=r"document 3: no text in field 'text' \(fields: body\)"):
        source.document(2)
    with pytest.raises(CorpusError, match="no column 'text'"):
        pq.write_table(pa.table({"body": ["x"]}), tmp_path / "p.parquet")
        ParquetSource(tmp_path / "p.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="holds no documents"):
        Corpus(open_source(str(tmp_path / "empty")))
    table = tmp_path / "docs.csv"
    table.write_text("text\nhello\n")
    with pytest.raises(CorpusError, match=r"must end in \.jsonl or \.parquet"):
        open_source(str(table))


def test_cli_samples_as_json() -> None:
    command = [sys.executable, "-m", "spadework", "corpus", "sample", "--count", "2", "--max-tokens", "64", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    drawn = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(drawn) == 2 and all(approximate_tokens(d["text"]) <= 64 and d["source"] for d in drawn)


def test_hugging_face_datasets_saved_hub_style_and_streamed(tmp_path: Path) -> None:
    import datasets

    rows = {"text": [f"Document number {i}." for i in range(40)], "title": [f"T{i}" for i in range(40)]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "saved"))
    saved = open_source(f"hf:{tmp_path / 'saved'}")
    assert len(saved) == 40 and saved.document(7) == Document(f"hf:{tmp_path / 'saved'}#7", "T7", "Document number 7.")
    drawn = Counter(Corpus(saved).sample(random.Random(seed)).title for seed in range(2000))
    assert len(drawn) == 40 and max(drawn.values()) < 2.5 * min(drawn.values())  # uniform over the rows

    lines = tmp_path / "stream.jsonl"
    lines.write_text("".join(json.dumps({"body": text}) + "\n" for text in rows["text"]))
    streamed = open_source(f"hf-stream:{lines}", text_field="body")
    assert sorted(streamed.document(i).text for i in range(len(streamed))) == sorted(rows["text"])
    with pytest.raises(CorpusError, match="no column 'text'"):
        open_source(f"hf-stream:{lines}")
    with pytest.raises(CorpusError, match="cannot open"):
        open_source(f"hf:{tmp_path / 'absent'}@train")
