"""Tokenisation and sentence splitting that work for English, Japanese and Chinese.

Whitespace tokenisers (and rouge-score's default, which keeps only ``[a-z0-9]``) silently drop or merge
CJK text. Here every Han, Hiragana and Katakana character is its own token, the usual choice for
character-level BLEU/ROUGE on Chinese and Japanese; runs of other letters and digits (Latin, Cyrillic,
Hangul words ...) stay whole words.

Must not call a model: tokenising and sentence splitting are rules (pysbd for sentences).
"""

from __future__ import annotations

import functools
import re

# Han (CJK unified ideographs, extension A, compatibility), Hiragana, Katakana (+ phonetic extensions,
# half-width forms).
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORDS = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_WORDS_AND_PUNCT = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+|[^\\w\\s]")
# Sentence ends in CJK text: a full-width stop not followed by a closing quote or bracket.
_CLOSERS = "」』）)\"”"
_CJK_SENTENCE_END = re.compile(f"(?<=[。！？])(?![{_CLOSERS}])")


def has_cjk(text: str) -> bool:
    return bool(_CJK_CHAR.search(text))


def tokenize(text: str, *, lower: bool = True, keep_punct: bool = False) -> list[str]:
    """Word tokens for Latin-script text, one token per character for Chinese/Japanese."""
    if lower:
        text = text.lower()
    return (_WORDS_AND_PUNCT if keep_punct else _WORDS).findall(text)


_ASCII_WORD = re.compile(r"^[a-z0-9]+$")


@functools.lru_cache(maxsize=1)
def _porter():
    from nltk.stem import porter  # rouge-score's own dependency and stemmer

    return porter.PorterStemmer()


class Tokenizer:
    """The ``tokenize(text)`` object rouge-score expects, CJK-aware. ``stem=True`` applies rouge-score's
    stemming (Porter, words over 3 characters) to ASCII words, as rouge-score's ``use_stemmer`` does;
    words of other scripts and CJK characters are kept as they are."""

    def __init__(self, stem: bool = False):
        self.stem = stem

    def tokenize(self, text: str) -> list[str]:
        tokens = tokenize(text)
        if self.stem:
            stemmer = _porter()
            tokens = [stemmer.stem(t) if len(t) > 3 and _ASCII_WORD.match(t) else t for t in tokens]
        return tokens


@functools.lru_cache(maxsize=8)
def _segmenter(language: str):
    import pysbd

    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; pysbd's rules for Japanese, Chinese or English, chosen from the script."""
    text = text.strip()
    if not text:
        return []
    if has_cjk(text):
        language = "ja" if re.search("[\u3040-\u30ff]", text) else "zh"
    else:
        language = "en"
    pieces = _segmenter(language).segment(text)
    sentences = []
    for piece in pieces:
        # pysbd's zh/ja rules miss some full-width stops followed by Latin text; split those too.
        for part in _CJK_SENTENCE_END.split(piece) if language != "en" else [piece]:
            part = part.strip()
            if part:
                sentences.append(part)
    return sentences
