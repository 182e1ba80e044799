"""Offline retrieval for the built-in engine: knowledge search, procedure triggers, handoff cues."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from helpline.agent.text import STOPWORDS, Analyzer, Speller, related, words

# BM25 term-frequency saturation and length normalisation. Passages are short, so length
# matters less than in whole-document BM25.
_K1 = 1.2
_B = 0.5
# A question term found in the article title counts as found in every passage of the article:
# the title says what the whole article is about.
_TITLE_CREDIT = 1.0
# Extra ranking weight for title matches and for how much the whole article is about a term:
# they order articles but are not part of the confidence.
_TITLE_BONUS = 0.4
_ARTICLE_BONUS = 0.3
_POSITION_BONUS = 0.08
_REPEAT_BONUS = 0.3
DEFAULT_MIN_SCORE = 0.5
# Matched idf weight, as a share of the weight of a word only one passage uses, below which a
# hit is too vague to trust even at full coverage: a question made only of words most articles
# use ("my order?") has no particular answer.
_MIN_EVIDENCE = 0.37
DEFAULT_MIN_TRIGGER_SCORE = 0.6
_SHORT_QUESTION_TERMS = 5
_LONG_PASSAGE_WORDS = 120
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Article:
    """A knowledge-base article: its slug, title and markdown body."""

    slug: str
    title: str
    body: str


@dataclass(frozen=True)
class Hit:
    """One search result: the article and its best passage; score is a 0..1 confidence."""

    slug: str
    title: str
    passage: str
    score: float


@dataclass(frozen=True)
class _Passage:
    article: int
    text: str
    length: int


def split_passages(body: str, title: str = "") -> list[str]:
    """Split a markdown body into passages: paragraphs, long ones cut into sentence windows."""
    lines = body.strip().splitlines()
    if lines and lines[0].lstrip("#").strip() == title.strip() and lines[0].startswith("#"):
        lines = lines[1:]
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        stripped = line.strip()
        if stripped.startswith("#"):
            # A heading starts a new section; its words stay with the following paragraph.
            if current:
                paragraphs.append(" ".join(current))
            current = [stripped.lstrip("#").strip() + ":"]
        elif stripped:
            current.append(stripped)
        elif current and not current[-1].endswith(":"):
            paragraphs.append(" ".join(current))
            current = []
    passages: list[str] = []
    for paragraph in paragraphs:
        if len(paragraph.split()) <= _LONG_PASSAGE_WORDS:
            passages.append(paragraph)
            continue
        sentences = _SENTENCE_RE.split(paragraph)
        for start in range(0, len(sentences), 3):
            passages.append(" ".join(sentences[start : start + 4]))
    return passages


class _Query:
    """A question's terms with their alternatives (term, credit weight) and their idf weights."""

    def __init__(self, terms: list[tuple[str, float]], idf: Mapping[str, float], unknown: float):
        best: dict[str, float] = {}
        for term, confidence in terms:
            best[term] = max(best.get(term, 0.0), confidence)
        self.alternatives = {
            term: [(term, conf)] + [(other, conf * weight) for other, weight in related(term)]
            for term, conf in best.items()
        }
        # In a short question a word no text uses is probably its subject ("gym membership");
        # in a long message such words are mostly narrative ("honestly", "sound quality").
        unknown *= min(1.0, _SHORT_QUESTION_TERMS / max(1, len(best)))
        self.weights = {term: idf.get(term, unknown) for term in best}
        self.total = sum(self.weights.values())


def _idf(df: int, n: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class KnowledgeIndex:
    """BM25-style passage index over knowledge articles with a normalised confidence score."""

    def __init__(self, articles: Sequence[Article], min_score: float) -> None:
        self._articles = list(articles)
        self._min_score = min_score
        self._analyzer = Analyzer([a.title + "\n" + a.body for a in articles])
        self._passages: list[_Passage] = []
        self._by_article: list[list[int]] = []
        self._titles: dict[str, set[int]] = defaultdict(set)
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self._article_tf: dict[str, dict[int, int]] = defaultdict(dict)
        self._article_length: list[int] = []
        doc_freq: Counter[str] = Counter()
        for index, article in enumerate(self._articles):
            title_terms = {t for t, _ in self._analyzer.analyze(article.title)}
            for term in title_terms:
                self._titles[term].add(index)
            ids = []
            for text in split_passages(article.body, article.title):
                terms = [t for t, _ in self._analyzer.analyze(text)]
                passage_id = len(self._passages)
                self._passages.append(_Passage(index, text, len(terms)))
                ids.append(passage_id)
                doc_freq.update(set(terms) | title_terms)
                for term, count in Counter(terms).items():
                    self._postings[term].append((passage_id, count))
                    self._article_tf[term][index] = self._article_tf[term].get(index, 0) + count
            self._by_article.append(ids)
            self._article_length.append(sum(self._passages[i].length for i in ids))
        n = max(1, len(self._passages))
        self._avg_length = sum(p.length for p in self._passages) / n or 1.0
        self._avg_article_length = sum(self._article_length) / max(1, len(self._articles)) or 1.0
        self._idf = {term: _idf(df, n) for term, df in doc_freq.items()}
        # A question word no article uses weighs like the rarest known word: it is probably
        # what the question is about, and an answer that ignores it is probably off-topic.
        self._unknown_idf = _idf(1, n)
        self._min_evidence = _MIN_EVIDENCE * self._unknown_idf

    @classmethod
    def build(
        cls, articles: Sequence[Article], *, min_score: float = DEFAULT_MIN_SCORE
    ) -> KnowledgeIndex:
        """Index the articles; min_score is the confidence below which nothing is returned."""
        return cls(articles, min_score)

    def search(self, query: str, *, limit: int = 3) -> list[Hit]:
        """Return up to limit articles (best passage each) above the confidence threshold."""
        ranked = self._rank(query)
        return [hit for _, hit in ranked if hit.score >= self._min_score][:limit]

    def best(self, query: str) -> Hit | None:
        """Return the best hit if it is confident enough, else None."""
        ranked = self._rank(query)
        if not ranked or ranked[0][1].score < self._min_score:
            return None
        return ranked[0][1]

    @staticmethod
    def _tf_credit(tf: int, length: float, average: float) -> float:
        # BM25 term-frequency factor scaled so one occurrence in an average text is 1.0.
        norm = 1.0 - _B + _B * length / average
        return tf * (_K1 + 1.0) / (tf + _K1 * norm)

    def _rank(self, query: str) -> list[tuple[tuple[float, float, int], Hit]]:
        q = _Query(self._analyzer.analyze(query, correct=True), self._idf, self._unknown_idf)
        if not q.total:
            return []
        body: dict[str, dict[int, float]] = {}
        title: dict[str, dict[int, float]] = {}
        whole: dict[str, dict[int, float]] = {}
        terms_in: dict[int, list[str]] = defaultdict(list)  # article -> question terms it has
        for term, alternatives in q.alternatives.items():
            body[term], title[term], whole[term] = {}, {}, {}
            for alt, weight in alternatives:
                for passage_id, tf in self._postings.get(alt, ()):
                    length = self._passages[passage_id].length
                    credit = weight * self._tf_credit(tf, length, self._avg_length)
                    if credit > body[term].get(passage_id, 0.0):
                        body[term][passage_id] = credit
                for index in self._titles.get(alt, ()):
                    title[term][index] = max(title[term].get(index, 0.0), weight * _TITLE_CREDIT)
                for index, tf in self._article_tf.get(alt, {}).items():
                    length = self._article_length[index]
                    credit = weight * self._tf_credit(tf, length, self._avg_article_length)
                    whole[term][index] = max(whole[term].get(index, 0.0), credit)
            for index in title[term].keys() | whole[term].keys():
                terms_in[index].append(term)
        results: list[tuple[tuple[float, float, int], Hit]] = []
        for index, terms in terms_in.items():
            best: tuple[tuple[float, float, int], float] | None = None
            chosen: tuple[float, int] | None = None  # (preference, passage) for the answer text
            for position, passage_id in enumerate(self._by_article[index]):
                matched = rank = 0.0
                for term in terms:
                    weight = q.weights[term]
                    in_title = title[term].get(index, 0.0)
                    credit = max(body[term].get(passage_id, 0.0), in_title)
                    capped = min(1.0, credit)
                    matched += weight * capped
                    # Repeating a term earns less than covering another one.
                    extra = _REPEAT_BONUS * (credit - capped) + _TITLE_BONUS * in_title
                    extra += _ARTICLE_BONUS * whole[term].get(index, 0.0)
                    rank += weight * (capped + extra)
                key = (rank / q.total, matched / q.total, -passage_id)
                if best is None or key > best[0]:
                    best = (key, matched)
                # Articles open with their main answer: among passages that answer about as
                # much, prefer the earlier one (ranking between articles is unaffected).
                preference = key[0] + _POSITION_BONUS / (1 + position)
                if chosen is None or preference > chosen[0]:
                    chosen = (preference, passage_id)
            if best is not None and chosen is not None:
                key, matched = best
                # Confidence: the share of the question's weight this passage answers, reduced
                # when what it answers is only vague.
                score = key[1] * min(1.0, matched / self._min_evidence)
                article = self._articles[index]
                passage = self._passages[chosen[1]].text
                results.append((key, Hit(article.slug, article.title, passage, round(score, 4))))
        results.sort(key=lambda item: item[0], reverse=True)
        return results


class TriggerMatcher:
    """Matches a message to the procedure whose example phrases (triggers) it resembles most."""

    def __init__(self, procedures: Mapping[str, Sequence[str]], min_score: float) -> None:
        self._min_score = min_score
        self._triggers: list[tuple[str, set[str]]] = []
        texts = [t for phrases in procedures.values() for t in phrases]
        self._analyzer = Analyzer(texts)
        doc_freq: Counter[str] = Counter()
        for name in sorted(procedures):
            vocabulary: set[str] = set()
            for phrase in procedures[name]:
                terms = {t for t, _ in self._analyzer.analyze(phrase)}
                if terms:
                    self._triggers.append((name, terms))
                    vocabulary |= terms
            doc_freq.update(vocabulary)
        # Rarity is measured across procedures, not triggers: a word every trigger of one
        # procedure repeats is what tells that procedure apart, not a common word.
        n = max(1, len(procedures))
        self._idf = {term: _idf(df, n) for term, df in doc_freq.items()}
        self._unknown_idf = _idf(1, n)

    @classmethod
    def build(
        cls,
        procedures: Mapping[str, Sequence[str]],
        *,
        min_score: float = DEFAULT_MIN_TRIGGER_SCORE,
    ) -> TriggerMatcher:
        """Index procedure name -> trigger phrases (a description may be passed as one more)."""
        return cls(procedures, min_score)

    def match(self, text: str) -> tuple[str, float] | None:
        """Return the best procedure and its 0..1 confidence, or None below the threshold."""
        q = _Query(self._analyzer.analyze(text, correct=True), self._idf, self._unknown_idf)
        if not q.total:
            return None
        best: tuple[float, str] | None = None
        for name, terms in self._triggers:
            # Both directions count: the message should be mostly about the trigger, and the
            # trigger's key words should mostly appear in the message.
            matched: dict[str, float] = {}
            covered = 0.0
            for term, alternatives in q.alternatives.items():
                credit = max((w for alt, w in alternatives if alt in terms), default=0.0)
                covered += q.weights[term] * credit
                for alt, w in alternatives:
                    if alt in terms:
                        matched[alt] = max(matched.get(alt, 0.0), w)
            trigger_total = sum(self._idf[t] for t in terms)
            trigger_cov = sum(self._idf[t] * c for t, c in matched.items()) / trigger_total
            score = math.sqrt(covered / q.total * trigger_cov)
            # Sharing only words several procedures use ("order") identifies none of them.
            score *= min(1.0, covered / self._unknown_idf)
            if best is None or score > best[0]:
                best = (score, name)
        if best is None or best[0] < self._min_score:
            return None
        return best[1], round(best[0], 4)


_HUMAN_NOUNS = frozenset(
    """human humans person people agent agents representative representatives rep reps operator
    operators staff employee manager supervisor someone somebody anyone anybody advisor adviser
    associate consultant specialist""".split()
)
_SERVICE_PHRASES = frozenset(
    [
        ("customer", "service"),
        ("customer", "support"),
        ("customer", "care"),
        ("support", "team"),
        ("support", "staff"),
        ("help", "desk"),
        ("call", "center"),
        ("call", "centre"),
    ]
)
_REAL = frozenset("real live actual human physical".split())
_CONTACT_VERBS = frozenset(
    """talk talking speak speaking chat chatting call phone ring connect transfer reach contact
    escalate""".split()
)
_WANT_VERBS = frozenset("get need want".split())
_BOTS = frozenset("bot bots robot chatbot machine ai automated".split())
_NEGATIONS = frozenset("not dont no never without".split())
# Words that may surround a bare request such as "agent please" without changing its meaning.
_FILLER = (STOPWORDS | _REAL | frozenset("asap immediately now just".split())) - _HUMAN_NOUNS
_HUMAN_LEXICON = Counter(_HUMAN_NOUNS | _REAL | _CONTACT_VERBS | {"customer", "support"})
_human_speller = Speller(_HUMAN_LEXICON)
_KNOWN = STOPWORDS | _BOTS | frozenset("cell mail tall useless customer".split())


def _human_words(text: str) -> list[str]:
    result = []
    for word in words(text):
        if len(word) >= 4 and word not in _HUMAN_LEXICON and word not in _KNOWN:
            word = _human_speller.correct(word) or word
        result.append(word)
    return result


def _names_a_person(tokens: list[str]) -> bool:
    """Whether a human (not "someone else", a third party) or a support desk is named."""
    for i, token in enumerate(tokens):
        if token in _HUMAN_NOUNS and tokens[i + 1 : i + 2] != ["else"]:
            return True
    return any(pair in _SERVICE_PHRASES for pair in itertools.pairwise(tokens))


def is_human_request(text: str) -> bool:
    """Tell whether the message asks to be put through to a person rather than the bot."""
    tokens = _human_words(text)
    content = [t for t in tokens if t not in _FILLER]
    # "agent please", "representative", "real person!": the whole message is the request.
    if content and len(content) <= 2 and all(t in _HUMAN_NOUNS for t in content):
        return True
    for i, token in enumerate(tokens):
        # "talk to a human", "speak with someone from customer service", "call someone".
        if token in _CONTACT_VERBS and _names_a_person(tokens[i + 1 : i + 6]):
            return True
        # "a real person", "live agent", "an actual human".
        if token in _REAL and tokens[i + 1 : i + 2] and tokens[i + 1] in _HUMAN_NOUNS - {token}:
            return True
        # "get me someone", "I need a human", "I want an agent" (but not "get someone else").
        if token in _WANT_VERBS:
            nearby = [t for t in tokens[i + 1 : i + 4] if t not in {"me", "a", "an", "to", "some"}]
            if nearby[:1] and nearby[0] in _HUMAN_NOUNS and nearby[1:2] != ["else"]:
                return True
    # "I don't want to chat with a bot".
    words_set = set(tokens)
    return bool(words_set & _BOTS and words_set & _NEGATIONS and words_set & _CONTACT_VERBS)
