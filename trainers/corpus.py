"""Grounding documents for the designer: sources sampled uniformly at random, chunked to a token budget.

A source is a JSON-lines file, a Parquet file, a folder of text/markdown/reST files, or one of two built-in
corpora: `tables` (`trainers/tables.py`: reference tables from PyPI wheels, a description and a sample of
rows each, which a world's tables and records can come from) and `python-docs`: documentation that ships
with every Python install and that this project did not write, the `pydoc_data` language-reference topics
and the docstrings of the standard library's modules, read with `ast` from their source files (never
imported: some stdlib modules act on import). Nothing is downloaded.

Sampling is uniform over documents, then uniform over a document's chunks, so a long manual does not
crowd out short pages. Large files are indexed (JSONL byte offsets, Parquet row groups), not loaded.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sysconfig
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from trainers.documents import CorpusError, Document, Source
from trainers.tables import TablesSource

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
# Not documentation, or not the standard library's own (site-packages lives under the stdlib folder).
_SKIPPED_PACKAGES = {"site-packages", "test", "tests", "idlelib", "lib2to3", "ensurepip", "turtledemo", "__pycache__"}
TokenCounter = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """About four characters per token for English prose and code; pass a tokenizer's count for exactness."""
    return max(1, len(text) // 4)


def chunk(text: str, max_tokens: int, count: TokenCounter = approximate_tokens) -> list[str]:
    """Split on paragraph boundaries into pieces of at most `max_tokens`; a long paragraph splits on lines,
    then on words."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    pieces: list[str] = []
    current: list[str] = []
    for paragraph in _units(text, max_tokens, count):
        candidate = "\n\n".join([*current, paragraph])
        if current and count(candidate) > max_tokens:
            pieces.append("\n\n".join(current))
            current = [paragraph]
        else:
            current.append(paragraph)
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _units(text: str, max_tokens: int, count: TokenCounter) -> list[str]:
    units: list[str] = []
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", text)):
        if not paragraph:
            continue
        if count(paragraph) <= max_tokens:
            units.append(paragraph)
            continue
        for separator in ("\n", " "):
            parts = paragraph.split(separator)
            if all(count(part) <= max_tokens for part in parts):
                units.extend(_pack(parts, separator, max_tokens, count))
                break
        else:  # one unbroken run longer than the budget: cut by characters
            step = max(1, len(paragraph) * max_tokens // count(paragraph))
            units.extend(paragraph[i : i + step] for i in range(0, len(paragraph), step))
    return units


def _pack(parts: Sequence[str], separator: str, max_tokens: int, count: TokenCounter) -> list[str]:
    packed: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current}{separator}{part}" if current else part
        if current and count(candidate) > max_tokens:
            packed.append(current)
            current = part
        else:
            current = candidate
    return [*packed, current] if current else packed


class Corpus:
    """Samples a document uniformly at random from a source, then one of its chunks uniformly."""

    def __init__(self, source: Source, max_tokens: int = 1500, count: TokenCounter = approximate_tokens) -> None:
        if len(source) == 0:
            raise CorpusError(f"the corpus {source.name!r} holds no documents")
        self.source = source
        self.max_tokens = max_tokens
        self.count = count

    def sample(self, rng: random.Random) -> Document:
        document = self.source.document(rng.randrange(len(self.source)))
        pieces = chunk(document.text, self.max_tokens, self.count) or [""]
        index = rng.randrange(len(pieces))
        suffix = f"#chunk{index + 1}of{len(pieces)}" if len(pieces) > 1 else ""
        return Document(source=document.source + suffix, title=document.title, text=pieces[index])


class JsonLinesSource:
    """A `.jsonl` file, one document per line; only byte offsets are held in memory."""

    def __init__(self, path: Path, text_field: str = "text", title_field: str | None = "title") -> None:
        self.path, self.text_field, self.title_field = path, text_field, title_field
        self.name = str(path)
        self.offsets: list[int] = []
        with path.open("rb") as file:
            offset = 0
            for line in file:
                if line.strip():
                    self.offsets.append(offset)
                offset += len(line)

    def __len__(self) -> int:
        return len(self.offsets)

    def document(self, index: int) -> Document:
        with self.path.open("rb") as file:
            file.seek(self.offsets[index])
            raw = file.readline()
        where = f"{self.path}, document {index + 1}"
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise CorpusError(f"{where}: not valid JSON ({error.msg})") from None
        return _record_document(record, where, self.text_field, self.title_field)


class ParquetSource:
    """A Parquet file, one document per row; a row is read from its row group when it is sampled."""

    def __init__(self, path: Path, text_field: str = "text", title_field: str | None = "title") -> None:
        import pyarrow.parquet as pq

        self.path, self.text_field, self.title_field = path, text_field, title_field
        self.name = str(path)
        self.file = pq.ParquetFile(path)
        columns = self.file.schema_arrow.names
        if text_field not in columns:
            raise CorpusError(f"{path}: no column {text_field!r} (columns: {', '.join(columns)})")
        self.columns = [text_field] + ([title_field] if title_field and title_field in columns else [])
        self.starts: list[int] = []
        total = 0
        for group in range(self.file.num_row_groups):
            self.starts.append(total)
            total += self.file.metadata.row_group(group).num_rows
        self.rows = total

    def __len__(self) -> int:
        return self.rows

    def document(self, index: int) -> Document:
        import bisect

        group = bisect.bisect_right(self.starts, index) - 1
        table = self.file.read_row_group(group, columns=self.columns)
        record = table.slice(index - self.starts[group], 1).to_pylist()[0]
        return _record_document(record, f"{self.path}, row {index + 1}", self.text_field, self.title_field)


class FolderSource:
    """Every text, markdown or reST file under a folder, one document each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = str(root)
        self.files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)

    def __len__(self) -> int:
        return len(self.files)

    def document(self, index: int) -> Document:
        path = self.files[index]
        text = path.read_text(encoding="utf-8", errors="replace")
        return Document(source=str(path), title=path.stem, text=text)


class PythonDocsSource:
    """Python's own documentation: the language-reference topics and the stdlib's module docstrings."""

    name = "python-docs"

    @cached_property
    def documents(self) -> list[Document]:
        from pydoc_data.topics import topics

        documents = [Document(f"pydoc:{name}", name, text) for name, text in sorted(topics.items())]
        return documents + _stdlib_docs()

    def __len__(self) -> int:
        return len(self.documents)

    def document(self, index: int) -> Document:
        return self.documents[index]


def _stdlib_docs(minimum_chars: int = 400) -> list[Document]:
    """Module docstrings plus their public classes' and functions' docstrings, parsed from source."""
    root = Path(sysconfig.get_paths()["stdlib"])
    documents = []
    modules = [*root.glob("*.py"), *root.glob("*/*.py")]
    for path in sorted(modules):
        if (path.stem.startswith("_") and path.stem != "__init__") or path.parent.name in _SKIPPED_PACKAGES:
            continue
        name = path.parent.name if path.stem == "__init__" else ".".join(path.relative_to(root).with_suffix("").parts)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        parts = [ast.get_docstring(tree) or ""]
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                if doc:
                    parts.append(f"{node.name}: {doc}")
        text = "\n\n".join(part for part in parts if part)
        if len(text) >= minimum_chars:
            documents.append(Document(f"stdlib:{name}", name, text))
    return documents


def _record_document(record: Any, where: str, text_field: str, title_field: str | None) -> Document:
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: a document must be a JSON object, not {type(record).__name__}")
    text = record.get(text_field)
    if not isinstance(text, str):
        raise CorpusError(f"{where}: no text in field {text_field!r} (fields: {', '.join(map(str, record))})")
    title = record.get(title_field) if title_field else None
    return Document(source=where, title=str(title) if title is not None else "", text=text)


class NoDocumentSource:
    """The no-corpus ablation: one empty document, so the designer writes from the contract alone."""

    name = "none"

    def __len__(self) -> int:
        return 1

    def document(self, index: int) -> Document:
        return Document(source="none", title="no document", text="")


HF_PREFIX, HF_STREAM_PREFIX = "hf:", "hf-stream:"
STREAM_WINDOW = 10_000


class DatasetSource:
    """A Hugging Face `datasets` dataset with random access (a saved directory, or a hub dataset in the cache).

    `hf:DIR` loads a `save_to_disk` directory; `hf:NAME[@SPLIT]` a hub dataset (downloaded once when the user
    has network; from the local cache otherwise). Sampling is uniform over its rows.
    """

    def __init__(self, dataset: Any, name: str, text_field: str = "text", title_field: str = "title") -> None:
        if text_field not in dataset.column_names:
            columns = ", ".join(dataset.column_names)
            raise CorpusError(f"{name}: no column {text_field!r} (columns: {columns}); pass --text-field")
        self.dataset, self.name = dataset, name
        self.text_field, self.title_field = text_field, title_field

    def __len__(self) -> int:
        return len(self.dataset)

    def document(self, index: int) -> Document:
        row = self.dataset[index]
        title = str(row.get(self.title_field) or f"row {index}")
        return Document(source=f"{self.name}#{index}", title=title, text=str(row[self.text_field]))


def _split(spec: str) -> tuple[str, str]:
    name, _, split = spec.partition("@")
    return name, split or "train"


def open_hf_source(spec: str, text_field: str = "text", window: int = STREAM_WINDOW) -> Source:
    """`hf:DIR`, `hf:NAME[@SPLIT]`, or `hf-stream:NAME|FILE[@SPLIT]`.

    A stream has no length, so uniform sampling over all of it is impossible without reading it whole:
    `hf-stream:` reads the first `window` rows of a shuffled stream (shuffle buffer of the same size) and
    samples uniformly among them. FILE is a local .jsonl/.json/.csv/.parquet file, streamed the same way.
    """
    try:
        import datasets
    except ImportError:
        raise CorpusError(
            "Hugging Face corpora need the datasets package (a spadework dependency): pip install datasets"
        ) from None
    streaming = spec.startswith(HF_STREAM_PREFIX)
    name, split = _split(spec.removeprefix(HF_STREAM_PREFIX if streaming else HF_PREFIX))
    try:
        if not streaming and Path(name).is_dir():
            loaded = datasets.load_from_disk(name)
            dataset = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
            return DatasetSource(dataset, spec, text_field)
        builder = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}.get(Path(name).suffix)
        arguments = {"path": builder, "data_files": name} if builder else {"path": name}
        if not streaming:
            return DatasetSource(datasets.load_dataset(**arguments, split=split), spec, text_field)
        stream = datasets.load_dataset(**arguments, split=split, streaming=True)
        rows = list(stream.shuffle(seed=0, buffer_size=window).take(window))
        return DatasetSource(datasets.Dataset.from_list(rows), spec, text_field)
    except CorpusError:
        raise
    except Exception as error:  # datasets raises many kinds: missing, offline, bad split, bad file
        raise CorpusError(f"cannot open {spec!r}: {type(error).__name__}: {error}") from None


BUILT_IN = ("tables", "python-docs")


def open_source(spec: str, text_field: str = "text") -> Source:
    """`tables`, `python-docs`, a `.jsonl` or `.parquet` file, a folder of text files, or a Hugging Face
    dataset (`hf:...`)."""
    if spec == "tables":
        return TablesSource()
    if spec == "python-docs":
        return PythonDocsSource()
    if spec == "none":
        return NoDocumentSource()
    if spec.startswith((HF_PREFIX, HF_STREAM_PREFIX)):
        return open_hf_source(spec, text_field)
    path = Path(spec).expanduser()
    if not path.exists():
        raise CorpusError(
            f"no corpus at {spec!r}: give a .jsonl or .parquet file, a folder, hf:NAME, {' or '.join(BUILT_IN)}"
        )
    if path.is_dir():
        return FolderSource(path)
    if path.suffix == ".jsonl":
        return JsonLinesSource(path, text_field)
    if path.suffix == ".parquet":
        return ParquetSource(path, text_field)
    raise CorpusError(f"{spec!r}: a corpus file must end in .jsonl or .parquet")
