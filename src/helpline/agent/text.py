"""Text analysis for the built-in engine: normalisation, stemming, synonyms and typo tolerance."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

_WORD_RE = re.compile(r"[a-z0-9]+")
# Apostrophes are removed rather than split on, so "don't" becomes one stopword "dont".
_APOSTROPHES = str.maketrans("", "", "'\u2019\u2018`\u00b4")

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any anymore anyone anything are as at be
    because been before being below between both but by can could did do does doing done down
    during each else even ever every few for from further get gets getting got gotten had has
    have having he her here hers him his how i if in into is it its itself just me mine more most
    my myself no nor not now of off on once only or other our ours out over own same she should
    so some such than that the their theirs them then there these they this those through to too
    under until up upon us very was we were what whats when where which while who whom why will
    with would you your yours yourself yourselves
    also already able actually again anyway around back bit cant couldnt didnt doesnt dont hasnt
    havent id ill im isnt ive lets like may maybe might must need needs okay ok please pls plz
    really shall still sure thanks thank thx u ur want wanna wasnt way wont would wouldnt yes yet
    hi hello hey dear guys team help assist kindly possible somehow something tell know let
    instead right one today tomorrow yesterday ago soon policy make made take nothing
    two three four five six seven eight nine ten twenty hundred
    """.split()
)

# Everyday words that say nothing about the topic. When a knowledge base never uses one, it is
# dropped from the question instead of counting as an unmatched (and so disqualifying) term, and
# it is never "corrected" into a similar-looking knowledge-base word ("says" is not "stays").
GENERIC_WORDS: frozenset[str] = frozenset(
    """
    say says said saying show shows showed showing go going goes went gone thing things nothing
    anything everything somewhere anywhere everywhere online internet website site page live
    living day days week weeks hour hours minute minutes ever never always available different
    sometimes often usually later early last try tried trying use used using work works worked
    think thought seem seems look looks looking looked find found see saw seen give gave given
    put keep kept mean means meant happen happened happens wait waiting waited fine good great
    bad best better worse old big small many much lot lots little first last next whole entire
    guy guys mind idea question questions ask asked asking wondering wonder hope hoping
    everyone anyone thing stuff someone somebody literally basically exactly already
    """.split()
)

# Concept groups, one per line: "canonical: member, member, ...". Members are words (matched
# with and without stemming), phrases (matched on stems, stopwords included) or words ending in
# "!" (matched verbatim only, because their stem collides with an unrelated word). Every member
# is rewritten to the canonical term in articles and questions alike, so the match is symmetric.
_CONCEPTS = """
refund: reimburse, reimbursement, repay, repayment, money back, moneyback, chargeback
return: send back, sent back, ship back, give back, take back, send it back
return: send them back, send this back, send these back, ship it back, take it back
cancel: cancellation, unsubscribe, terminate, discontinue, opt out, call off
cancel: dont want, do not want, no longer want, change my mind, changed my mind
subscription: subscribe, membership, member, sub!, subs!, recurring
login: log in, log on, logon, sign in, signin, sign on, get into, access my account, locked out
logout: log out, sign out, signout
password: passcode, passphrase, pwd!, pw!, pass word
twofactor: two factor, two step, 2 step, 2fa, mfa, multi factor, 2sv, otp!, one time code
twofactor: two factor authentication, two step verification, multi factor authentication
ship: deliver, delivery, dispatch, shipping
carrier: courier, ups!, fedex, usps, dhl, postal service, royal mail
arrive: arrival, get here, come, show up, turn up, reach me, appear
accept: you take, do you take, support paying, pay with, pay by
payment: pay, paid, paying
problem: issue, trouble, difficulty
package: parcel, shipment, packet
track: tracking, trace, whereabouts, locate
order: purchase, bought, buy, ordered
invoice: receipt, proof of purchase, invoicing
decline: reject, refuse, deny, bounce, fail, failure, go through, went through, not accepted
malfunction: not work, stop work, no longer work, isnt work, doesnt work, dont work, dead
malfunction: broke down, wont turn on, not turn on, stop turn on, stop respond, not respond
fault: faulty, defective, defect, glitch, manufacturing fault
damage: broken, broke, cracked, crack, smashed, shattered, crushed, dented, torn, scratched, busted
repair: fix, mend, fixing
warranty: guarantee, warrantee
item: product, thing, stuff, goods, merchandise
change: update, modify, edit, amend, alter, switch, swap
wrong: incorrect, mistake, mistaken, typo, wrongly
delete: deletion, erase, wipe, deactivate, get rid of, forget me, remove
data: information, info, personal data, personal information
export: download a copy, data copy
duty: customs!, duties, import, importation, tariff, clearance
international: internationally, abroad, overseas, worldwide, foreign, cross border
international: outside the us, outside the usa, other countries, another country
usa: the us, united states, u s, america
promo: promo code, promotion, promotional, coupon, discount, discount code, voucher code, offer code
giftcard: gift card, gift certificate, gift voucher, egift, e gift
price: cost, how much, pricing, priced
when: how long, how soon, how many days, when will, eta, estimated, estimate, time, times
email: e mail, inbox, mailbox
phone: mobile, cellphone, cell phone, smartphone, cell
code: pin
lost: lose, misplaced, stolen, losing
missing: not included, never came, never arrived, didnt arrive, hasnt arrived, not arrived
weekend: saturday, sunday
expire: expiry, expiration, expired, out of date
combine: stack, together, at the same time, at once
apply: redeem, enter the code
year: yearly, annual, annually
month: monthly
business: company, corporate, firm, organisation, organization
cheap: cheaper, cheapest, lower, less expensive
tax: vat, gst, sales tax
address: addr, postcode, zip code, postal code
liquid: water, wet, spill, spilled, splash, rain, soaked
uk: united kingdom, britain, great britain, england, scotland, wales
"""

# Softer, one-way relations used to expand a question: "term: other weight, ...". The other
# term earns only part of the credit, so an exact match still ranks first.
_RELATED = """
stop quit: cancel 0.8, pause 0.5
end: cancel 0.7
close: delete 0.8, cancel 0.5
leave: cancel 0.5, delete 0.5
send: ship 0.7, return 0.4
arrive: ship 0.6, when 0.5
follow: track 0.8
box: package 0.7
package: ship 0.5
repair: warranty 0.5
plan: subscription 0.7
subscription: plan 0.6
premium: subscription 0.6, plan 0.5
bill: invoice 0.6, payment 0.5
invoice: bill 0.6
payment: bill 0.5, charge 0.5, price 0.4
charge: payment 0.6, bill 0.6
money: payment 0.5, refund 0.5
card: payment 0.5
authenticator verification: twofactor 0.8
security: twofactor 0.5
lost: missing 0.6
missing: lost 0.6
copy: export 0.7, download 0.6
download: export 0.8
export: download 0.8
gdpr ccpa: privacy 0.8, data 0.6
privacy: data 0.6
malfunction: fault 0.8, problem 0.6, damage 0.5, decline 0.6
fault: malfunction 0.7, damage 0.5
damage problem: fault 0.5
cheap: price 0.6
upgrade downgrade: change 0.6, plan 0.5
device: item 0.5
item: device 0.4
country: international 0.6
office home apartment: address 0.6
building move: address 0.5
expense: business 0.6, invoice 0.5
"""

# Everyday names of gadgets and places: general knowledge rather than wording of one knowledge
# base, each related to the broader term an article would use.
_DEVICES = """speaker headphone headphones earbud earbuds earphone earphones headset smartwatch
watch tablet laptop notebook computer charger cable adapter keyboard mouse monitor screen camera
console tv television router speakerphone drone printer gadget"""
_PAYMENT_BRANDS = """paypal visa mastercard amex discover applepay gpay klarna afterpay venmo
maestro"""
_COUNTRIES_EU = """germany france spain italy netherlands belgium austria ireland portugal sweden
denmark finland poland greece czechia hungary romania croatia slovakia slovenia bulgaria
luxembourg estonia latvia lithuania cyprus malta"""
_COUNTRIES_OTHER = """brazil argentina chile colombia peru india china korea singapore
philippines indonesia thailand vietnam israel turkey egypt nigeria kenya uae"""

_DROPPED = STOPWORDS | GENERIC_WORDS
_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Return the English Snowball stem of one lowercase word."""
    return str(_stemmer.stemWord(word))


def normalize(text: str) -> str:
    """Casefold and strip accents and apostrophes (punctuation is left for words() to drop)."""
    if not text.isascii():
        folded = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return text.casefold().translate(_APOSTROPHES)


def words(text: str) -> list[str]:
    """Split text into normalised alphanumeric words."""
    return _WORD_RE.findall(normalize(text))


_Related = dict[str, list[tuple[str, float]]]


def _build_tables() -> tuple[dict[str, str], dict[str, str], dict[tuple[str, ...], str], _Related]:
    exact: dict[str, str] = {}
    stems: dict[str, str] = {}
    phrases: dict[tuple[str, ...], str] = {}
    for line in _CONCEPTS.strip().splitlines():
        canonical, _, members = line.partition(":")
        term = stem(canonical.strip())
        exact[canonical.strip()] = term
        stems[term] = term
        for raw in members.split(","):
            member = raw.strip()
            if " " in member:
                phrases[tuple(stem(w) for w in member.split())] = term
            elif member.endswith("!"):
                exact[member[:-1]] = term
            elif member:
                exact[member] = term
                stems.setdefault(stem(member), term)

    def canon(word: str) -> str:
        return exact.get(word) or stems.get(stem(word)) or stem(word)

    related: _Related = defaultdict(list)
    rules = [line.partition(":")[::2] for line in _RELATED.strip().splitlines()]
    rules += [
        (_DEVICES, "device 0.5, item 0.4"),
        (_PAYMENT_BRANDS, "payment 0.6, card 0.4"),
        (_COUNTRIES_EU, "eu 0.8, country 0.7, international 0.7"),
        (_COUNTRIES_OTHER, "country 0.7, international 0.7"),
    ]
    for sources, targets in rules:
        pairs = [(canon(n), float(w)) for n, w in (t.split() for t in targets.split(","))]
        for source in sources.split():
            related[canon(source)] += pairs
    return exact, stems, phrases, dict(related)


_EXACT, _STEMS, _PHRASES, _RELATED_TERMS = _build_tables()
_MAX_PHRASE = max(len(p) for p in _PHRASES)
_PHRASE_STARTS = frozenset(p[0] for p in _PHRASES)
# Words the tables know about, offered as spelling corrections alongside the corpus vocabulary.
_TABLE_WORDS: frozenset[str] = frozenset(
    w
    for w in words(
        _CONCEPTS + _RELATED + _DEVICES + _PAYMENT_BRANDS + _COUNTRIES_EU + _COUNTRIES_OTHER
    )
    if not w.isdigit()
)


def term_of(word: str) -> str:
    """Map one normalised word to its index term: its concept if it has one, else its stem."""
    return _EXACT.get(word) or _STEMS.get(stem(word)) or stem(word)


def related(term: str) -> list[tuple[str, float]]:
    """Return the weaker related terms of an index term with their weights (may be empty)."""
    return _RELATED_TERMS.get(term, [])


_KEYS = {
    ch: (row, col)
    for row, keys in enumerate(("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"))
    for col, ch in enumerate(keys)
}


def _adjacent_keys(a: str, b: str) -> bool:
    (row_a, col_a), (row_b, col_b) = _KEYS.get(a, (-9, -9)), _KEYS.get(b, (9, 9))
    return abs(row_a - row_b) <= 1 and abs(col_a - col_b) <= 1


def _osa_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (adjacent swaps count 1), or limit + 1 if larger."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                cost = 0
            else:
                # A slip onto a neighbouring key is a typo; any other substitution more often
                # turns one real word into another ("stock" is not "stack"), so it costs double.
                cost = 1 if _adjacent_keys(a[i - 1], b[j - 1]) else 2
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _bigrams(word: str) -> set[str]:
    padded = f"^{word}$"
    return {padded[i : i + 2] for i in range(len(padded) - 1)}


class Speller:
    """Maps an unknown word to the closest known word within a small edit distance."""

    def __init__(self, vocabulary: Counter[str], fallback: Speller | None = None) -> None:
        self._freq = vocabulary
        self._fallback = fallback
        self._by_bigram: dict[str, list[str]] = defaultdict(list)
        for word in vocabulary:
            for gram in _bigrams(word):
                self._by_bigram[gram].append(word)
        self._cache: dict[str, str | None] = {}

    def correct(self, word: str) -> str | None:
        """Return the best correction of word, or None when nothing is close enough."""
        if word not in self._cache:
            best = self._best(word)
            if len(self._cache) < 10_000:
                self._cache[word] = best[-1] if best else None
            return best[-1] if best else None
        return self._cache[word]

    def _best(self, word: str) -> tuple[int, bool, int, int, str] | None:
        limit = 1 if len(word) < 8 else 2
        grams = _bigrams(word)
        shared: Counter[str] = Counter()
        for gram in grams:
            shared.update(self._by_bigram.get(gram, ()))
        # Each edit destroys at most three bigrams, so fewer shared ones rule a word out.
        needed = max(1, len(grams) - 3 * limit)
        best = self._fallback._best(word) if self._fallback else None
        for candidate, count in shared.items():
            # Typos rarely hit the first letter; requiring it avoids most false corrections.
            if count < needed or candidate[0] != word[0] or candidate == word:
                continue
            distance = _osa_distance(word, candidate, limit)
            swap = sorted(word) == sorted(candidate)
            # Three-letter words allow only a swap: "hwo" is "how", but "car" is not "card".
            if distance > limit or (len(word) <= 3 and not swap):
                continue
            # On equal distance a swap ("lnog") is the likeliest slip, then the commoner word.
            key = (distance, not swap, -self._freq[candidate], abs(len(word) - len(candidate)))
            if best is None or (*key, candidate) < best:
                best = (*key, candidate)
        return best


_MAX_CORRECTIONS = 30
# The words of the tables and the stopwords are always candidates for a correction.
_BASE_SPELLER = Speller(Counter({w: 0 for w in _TABLE_WORDS | _DROPPED if len(w) >= 2}))


class Analyzer:
    """Turns text into index terms; for questions it also corrects words unknown to the corpus."""

    def __init__(self, corpus: Iterable[str]) -> None:
        counts: Counter[str] = Counter()
        for text in corpus:
            counts.update(w for w in words(text) if len(w) >= 3 and not w.isdigit())
        self._known_stems = {stem(w) for w in counts} | set(_STEMS)
        self._known_words = set(counts) | set(_EXACT) | _TABLE_WORDS | _DROPPED
        self._speller = Speller(counts, fallback=_BASE_SPELLER)

    def _is_known(self, word: str) -> bool:
        return word in self._known_words or word.isdigit() or stem(word) in self._known_stems

    def analyze(self, text: str, *, correct: bool = False) -> list[tuple[str, float]]:
        """Return (term, confidence) pairs; corrected words carry a confidence below 1."""
        tokens: list[tuple[str, float]] = []
        # Bounded so that a pasted wall of text cannot make one question slow.
        budget = _MAX_CORRECTIONS if correct else 0
        for word in words(text):
            if budget and len(word) >= 3 and not self._is_known(word):
                budget -= 1
                fixed = self._speller.correct(word)
                if fixed is not None:
                    tokens.append((fixed, 0.85))
                    continue
            tokens.append((word, 1.0))
        return _to_terms(tokens)


# Things whose whereabouts a customer asks about: "where is my ..." means "track my ...".
_TRACKED = frozenset(term_of(w) for w in ("order", "package", "item", "delivery"))


def _asks_where(tokens: list[tuple[str, float]], i: int) -> bool:
    """Whether tokens[i] starts a "where is my parcel" question, in any word order."""
    if tokens[i][0] not in ("where", "wheres"):
        return False
    # After a verb ("change where it goes") "where" names a place instead of asking for one.
    if i > 0 and tokens[i - 1][0] not in _DROPPED:
        return False
    following = [w for w, _ in tokens[i + 1 : i + 5] if w not in STOPWORDS]
    return bool(following) and term_of(following[0]) in _TRACKED


def _to_terms(tokens: list[tuple[str, float]]) -> list[tuple[str, float]]:
    stems = [stem(w) for w, _ in tokens]
    terms: list[tuple[str, float]] = []
    i = 0
    while i < len(tokens):
        if _asks_where(tokens, i):
            terms.append((term_of("track"), 1.0))
        longest = min(_MAX_PHRASE, len(tokens) - i) if stems[i] in _PHRASE_STARTS else 1
        for size in range(longest, 1, -1):
            concept = _PHRASES.get(tuple(stems[i : i + size]))
            if concept is not None:
                terms.append((concept, min(c for _, c in tokens[i : i + size])))
                i += size
                break
        else:
            word, confidence = tokens[i]
            if word not in _DROPPED and not word.isdigit() and len(word) > 1:
                terms.append((term_of(word), confidence))
            i += 1
    return terms


def analyze(text: str) -> list[str]:
    """Return the index terms of text without spelling correction (for tests and tools)."""
    return [term for term, _ in _to_terms([(w, 1.0) for w in words(text)])]
