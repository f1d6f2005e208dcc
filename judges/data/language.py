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
import threading
import unicodedata

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


#: Texts whose sentences ``split_sentences`` keeps (least recently used first out): a RAG context or a
#: source article is split again by every metric, signal and claim that reads it, and pysbd costs ~1 ms a
#: news sentence. 1,024 texts of a few KB each stay within a few MB.
SENTENCE_CACHE_SIZE = 1024


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; pysbd's rules for Japanese, Chinese or English, chosen from the script. The
    last ``SENTENCE_CACHE_SIZE`` texts' sentences are kept (``clear_sentence_cache`` empties the cache); each
    call returns a new list."""
    text = text.strip()
    return list(_sentences(text)) if text else []


@functools.lru_cache(maxsize=SENTENCE_CACHE_SIZE)
def _sentences(text: str) -> tuple[str, ...]:
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
    return tuple(sentences)


def clear_sentence_cache() -> None:
    """Forget the texts ``split_sentences`` and ``detect_language`` have kept (benchmarks time a first
    reading with it)."""
    _sentences.cache_clear()
    detect_language.cache_clear()


_ENGLISH_WORDS = frozenset("the an of and or to on at for with by from are was were be been has have had it "
                           "this that these those not he she they we you his her their its which who what "
                           "when where will would can could does did".split())
#: Function words English shares with the languages below (a, in, is, no, do, as, i): counted on neither side.
_SHARED_WORDS = frozenset("a in is no do as i".split())
# Function words and common pronouns of French, German, Spanish, Italian, Portuguese, Dutch, Indonesian,
# Polish, Czech and Turkish, leaving out the ones English text also spells: English words, and words, names
# and abbreviations that English text writes in lower case (un for UN, com for .com, los/las for Los
# Angeles/Las Vegas, et/al for et al., ve for I've, die, den, met, pro, ale, os, dos, em, lo, ma, na, van,
# con, per, non, come, son, war, um, er, dan, co, po, me) and single letters (y for a variable). Only words
# written in lower case count, and a sentence's first word (``detect_language``), so names and acronyms
# inside a sentence (La, El, Da, Che, MIT, OS) do not.
_OTHER_LATIN_WORDS = frozenset(
    "de le la les des du une est sont dans pour pas que qui sur avec ce cette il elle nous vous ils au aux ne se "
    "sa leur mais ou été être je tu suis "  # fr
    "der das und ist sind nicht ein eine einer eines dem mit für auf zu von sich auch es wir ihr sie ich "
    "wurde im oder aber mein dich mich "  # de
    "el del una unos su sus pero como más fue está yo mi muy también qué "  # es
    "gli della delle dei di che è sono nel alla anche più da io mio mia ho questo "  # it
    "das uma é são para não seu sua foi eu meu minha "  # pt
    "het een en zijn niet voor dat ook wij zij ik maar "  # nl
    "yang di ke dari ini itu untuk dengan tidak ada adalah akan pada juga saya "  # id
    "się nie jest że od jak ale tak był była "  # pl
    "je že jsou byl jako "  # cs
    "bir bu için ile çok olan gibi".split()) - _ENGLISH_WORDS - _SHARED_WORDS  # tr
_LETTER = re.compile(r"[^\W\d_]")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")


@functools.lru_cache(maxsize=SENTENCE_CACHE_SIZE)
def detect_language(text: str) -> str:
    """The language of ``text``: ``"en"``, ``"ja"`` / ``"zh"``, another language's ISO 639 code (``"fr"``,
    ``"de"``, ``"ru"`` ...), or ``""`` (no letters). Rules decide whether the text is English and read
    Chinese and Japanese (a quarter or more of the letters Han or kana; ``"ja"`` when there is any kana); a
    text the rules find in another language is named by ``name_language``. The rules for Latin letters: among
    the words in lower case and each sentence's first word, the function words of French, German, Spanish,
    Italian, Portuguese, Dutch, Indonesian, Polish, Czech or Turkish and the words with accented letters are
    two or more and outnumber the English function words; any other text in Latin letters is English (an
    English sentence of names and numbers with one function word in nine, or with an accented name, stays
    English; so does a short foreign sentence with one such word). Mostly another script (Cyrillic, Hangul,
    Arabic ...) is another language. Why rules first: a statistical identifier misreads short English
    sentences of names and numbers, which the verifier must not refuse. The text is read in Unicode's
    composed form (NFC). The last ``SENTENCE_CACHE_SIZE`` texts' answers are kept, as ``split_sentences``
    keeps their sentences (``clear_sentence_cache`` empties both)."""
    text = unicodedata.normalize("NFC", text)
    letters = _LETTER.findall(text)
    if not letters:
        return ""
    cjk = sum(1 for ch in letters if _CJK_CHAR.match(ch))
    latin = sum(1 for ch in letters if ch.isascii() or "\u00c0" <= ch <= "\u024f")
    if cjk >= max(1, latin // 4) and cjk >= len(letters) / 4:
        return "ja" if _KANA.search(text) else "zh"
    if latin < len(letters) / 2:
        return name_language(text)
    words = tokenize(text)
    if len(words) < 4:
        return "en"  # too short to tell English from other Latin-script languages; names and numbers mostly
    english = sum(1 for w in words if w in _ENGLISH_WORDS)
    foreign = sum(1 for w in _lower_case_words(text)
                  if w in _OTHER_LATIN_WORDS or any("\u00c0" <= ch <= "\u024f" for ch in w))
    return name_language(text) if foreign >= 2 and foreign > english else "en"


_IDENTIFYING = threading.Lock()


def name_language(text: str) -> str:
    """The ISO 639 code of the language other than English that ``text`` is likeliest in, by py3langid (a
    naive Bayes identifier over 97 languages, shipped with its model): called once the rules above have
    found the text is not English, so English is never the answer."""
    import py3langid

    with _IDENTIFYING:  # py3langid loads its model on the first call, into a module global
        ranked = py3langid.rank(text)
    return next(code for code, _ in ranked if code != "en")


def _lower_case_words(text: str) -> list[str]:
    """The words of ``text`` written in lower case, and each sentence's first word when only its first
    letter is a capital (lower-cased): capitalised names and acronyms inside a sentence are left out."""
    out, first = [], True
    for token in tokenize(text, lower=False, keep_punct=True):
        if not token[0].isalnum():
            first = first or token in ".!?¡¿"
            continue
        if token.islower() or (first and token[:1].isupper() and (len(token) == 1 or token[1:].islower())):
            out.append(token.lower())
        first = False
    return out
