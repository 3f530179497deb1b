"""How different the generated worlds are from each other: the Vendi score over their tool schemas.

Vendi (Friedman & Dieng, 2023) is the exponential of the entropy of the eigenvalues of K/n, where K is a
similarity matrix with ones on the diagonal: 1 when all n worlds are alike, n when all are different. The
embedding is a bag of words over each world's tool names, tool descriptions and argument names and types
(split on snake_case and camelCase), L2-normalised, with cosine similarity: no model is downloaded, and it
looks at what an agent sees of a world, not at how its code happens to be written.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

VENDI_EMBEDDING = "bag of words over tool names, descriptions, argument names and types; cosine similarity"
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def schema_words(tools: list[dict[str, Any]]) -> Counter[str]:
    """The words of a world's tool list (name, description, input schema's property names and types)."""
    words: Counter[str] = Counter()
    for tool in tools:
        words.update(w.lower() for w in _WORD.findall(tool.get("name", "")))
        words.update(w.lower() for w in _WORD.findall(tool.get("description", "")))
        for name, prop in tool.get("input_schema", {}).get("properties", {}).items():
            words.update(w.lower() for w in _WORD.findall(name))
            words[f"type:{prop.get('type', 'any')}"] += 1
    return words


def vendi_score(worlds: list[list[dict[str, Any]]]) -> float:
    """Vendi score of a list of worlds, each given as its tool list; 0.0 for no worlds."""
    if not worlds:
        return 0.0
    bags = [schema_words(tools) for tools in worlds]
    vocabulary = sorted(set().union(*bags))
    if not vocabulary:
        return 1.0
    index = {word: i for i, word in enumerate(vocabulary)}
    vectors = np.zeros((len(bags), len(vocabulary)))
    for row, bag in enumerate(bags):
        for word, count in bag.items():
            vectors[row, index[word]] = count
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, 1.0)
    eigenvalues = np.linalg.eigvalsh(similarity / len(bags))
    eigenvalues = eigenvalues[eigenvalues > 1e-12]
    return float(np.exp(-np.sum(eigenvalues * np.log(eigenvalues))))
