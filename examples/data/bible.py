#!/usr/bin/env python3
"""Build an English->Spanish verse-aligned parallel corpus from two SWORD Bibles.

Sources (public domain, packaged in Debian):

* English: World English Bible, SWORD module ``engWEB2015eb``
  (package ``sword-text-web``), versification NRSVA.
* Spanish: Reina-Valera 1909, SWORD module ``spaRV1909eb``
  (package ``sword-text-sparv``), versification KJV.

Both are exported with ``mod2imp`` (package ``libsword-utils``), which prints
each entry as a ``$$$Book C:V`` line followed by the entry's raw OSIS markup.
Standard library only.  Usage::

    python3 examples/data/bible.py [--out data/bible]

Pipeline, and why
-----------------

1. **Read.**  Only real verses (chapter >= 1, verse >= 1) are kept: module,
   testament, book and chapter headings (``[ ... ]``, ``C:0``) hold
   introductions, not translation.

2. **Strip the markup** (``strip_markup``).  Every OSIS element in the two
   modules falls into one of four groups:

   * removed with everything inside: ``note`` (footnotes and cross-references,
     which nest ``reference``, ``catchWord``, ``rdg``, ``seg``), ``title``
     unless ``canonical="true"`` (section headings), ``speaker`` (the WEB's
     "Beloved"/"Lover" labels in the Song of Solomon), ``rdg``, ``figure``.
     The *canonical* psalm titles ("A Psalm by David ...") are kept: they are
     translated text, and the Reina-Valera prints them as part of verse 1.
   * block elements, mostly written as milestones (``l`` poetry lines,
     ``lg``, ``lb``, ``div``, ``p``, ``list``, ``item``, ``chapter``,
     ``milestone`` ...): they separate words.
   * inline elements: their text is kept, the tags vanish.  Those holding
     whole words (``w``, ``transChange``, ``q``, anything unknown) mark a
     possible word boundary (see below); typographic ones (``hi``,
     ``divineName``, ``foreign``, ``name``, ``seg``) may cover part of a
     word and do not.
   * the end of a book (``<div type="book" eID=...>``) ends the verse: the
     WEB appends its whole glossary to Revelation 22:21.

   Spacing is where plain-text renderers go wrong, so it is decided at each
   place markup was removed:

   * A removed note or a block boundary is a *soft* separator: the
     whitespace around it collapses to one space, or to none before closing
     punctuation and after opening punctuation: ``God<note/>created`` ->
     "God created", ``word<note/>.`` -> "word.", ``coins <note/> ?`` ->
     "coins?".
   * Where two inline elements touch, the sources rely on the renderer to
     separate them: the WEB has ``God</w><w>created`` (107 times) and
     ``it.”</q><w>So``, the RV ``siempre</w><transChange>es</transChange>``.
     A space is inserted where a letter or digit follows a letter, digit or
     closing punctuation across such a boundary, nothing elsewhere
     (``God</w>’s``, ``word</w>.``).
   * Exception: the RV marks Spanish clitic pronouns added by the translator
     with ``transChange`` glued to the verb.  Enclitics must stay attached
     (``preguntándo<tc>le</tc>`` -> "preguntándole", ``díjo<tc>le</tc>Dios``
     -> "díjole Dios"), proclitics must not (``Josué<tc>los</tc> circuncidó``
     -> "Josué los circuncidó", ``cuánto<tc>nos</tc>ayudó`` -> "cuánto nos
     ayudó").  ``attaches_enclitic`` decides from the host word.

   The WEB's space between a closing quotation mark and the punctuation
   after it ("walk’ ?”") is removed.  XML entities are decoded, whitespace
   is normalised; Unicode punctuation (curly quotes, ¿ ¡, dashes) and
   accents are kept as they are.  A verse with no letter or digit left
   (combined verses, "—") counts as empty.

   Two features of the RV edition are undone, as the WEB has neither: it
   appends a colophon to the last verse of the Pauline epistles and Hebrews
   ("Amén. Fué escrita de Roma ..."), which is cut off (``cut_colophons``),
   and it prints the first word of every chapter in capitals ("EN el
   principio", "Y JEHOVÁ dijo"), which is respelled as the word is usually
   written ("En el principio", "Y Jehová dijo"; ``lower_drop_caps``).

3. **Align** (``align``).  Verses are paired by (book, chapter, verse).
   Books present in only one module (the WEB's deuterocanon) give no pairs.
   The RV text is squeezed into KJV verse slots but follows other numbering
   in places (the WEB's Numbers 12:16 is the RV's 13:1 and all of RV
   chapter 13 is shifted; Job 38-41, Jonah 1-2, Hosea 11-12, 1 Kings 22,
   2 Chronicles 33 ...), and elsewhere a verse boundary sits a clause earlier
   or later.  Equal numbers therefore do not guarantee equal content.  The
   rule, after Gale & Church (1993, "A program for aligning sentences in
   bilingual corpora"):

   * Translation lengths are proportional: l_es ~ c * l_en, with variance
     growing with length, so ``delta = (c*l_en - l_es) / sqrt(s2 * (l_en +
     l_es/c) / 2)`` is roughly standard normal for true pairs.  c and s2 are
     estimated robustly (median, MAD) from all same-numbered pairs, so the
     few bad pairs do not bias them.
   * In each book the English and Spanish verse sequences are aligned by
     dynamic programming over 1-1, 1-0, 0-1, 2-1, 1-2 and 2-2 "beads", each
     costing -log P(bead type) - log P(|delta|).  The aligner ignores verse
     numbers, so it follows a shifted run to its real partners, and a 2-2
     bead absorbs two verses whose shared boundary differs.  The length
     term is capped (``LENGTH_COST_CAP``): one odd verse must not bend the
     alignment; only a run of verses whose lengths agree better with another
     pairing does.
   * A same-numbered pair is kept only if the aligner links exactly these
     two verses 1-1 (reason otherwise: ``numbering shift``), and if its own
     |delta| is at most ``MAX_ABS_DELTA`` (reason: ``length ratio outlier``:
     text present in one version only, e.g. the quotation the RV adds to
     Matthew 27:35 and Revelation 1:11, or the doxology the WEB puts at
     Romans 14:24-26).
   * Verses empty in one text and verses numbered in only one module are
     dropped and counted under their own reasons.

   (Both modules carry Strong's numbers, which looked like a better anchor,
   but the WEB's tags are misplaced in whole chapters, e.g. Psalm 18:2 tags
   nearly every word H3068, so they are not used.)

4. **Split by whole books**, so no chapter leaks between sets.  Held-out
   books avoid near-duplicates of training text (the synoptic gospels,
   Kings/Chronicles, the Ezra/Nehemiah lists), and each set mixes
   Old-Testament narrative and poetry or wisdom with a New-Testament book:
   ``VALID_BOOKS`` (Judges, Lamentations, Romans) and ``TEST_BOOKS`` (Ruth,
   Ecclesiastes, Jonah, John), about 1,200 pairs each.  Everything else is
   training.

5. **Write** ``{train,valid,test}.{en,es}`` (one verse per line, UTF-8, "\\n")
   and ``report.txt`` into ``--out``.  Files are written into a temporary
   directory inside the output directory and moved into place with
   ``os.replace``; ``report.txt`` is removed first and moved last, so its
   presence marks a complete set.  The output is deterministic: re-running
   gives the same files.
"""

import argparse
import bisect
import collections
import html
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata

MODULES = {
    "en": ("engWEB2015eb", "sword-text-web"),
    "es": ("spaRV1909eb", "sword-text-sparv"),
}
MOD2IMP_PACKAGE = "libsword-utils"

# Held-out books (SWORD book names); see the module docstring.
VALID_BOOKS = ("Judges", "Lamentations", "Romans")
TEST_BOOKS = ("Ruth", "Ecclesiastes", "Jonah", "John")
SPLITS = ("train", "valid", "test")

# A pair with |delta| above this is dropped as a length outlier.  delta is
# ~N(0,1) for true pairs; beyond 4.5 the pairs seen have text that the other
# version lacks, below it they are loose but faithful translations.
MAX_ABS_DELTA = 4.5

# Prior probabilities of alignment beads.  Verse numbering agrees almost
# everywhere, so anything but 1-1 is rare (Gale & Church's sentence priors
# would be far too generous).
BEAD_PRIORS = {(1, 0): 0.0005, (0, 1): 0.0005, (2, 1): 0.0005,
               (1, 2): 0.0005, (2, 2): 0.0005}
BEAD_PRIORS[(1, 1)] = 1.0 - sum(BEAD_PRIORS.values())
BEAD_COSTS = tuple((bead, -math.log(p)) for bead, p in BEAD_PRIORS.items())
# Cap on a bead's length cost (-log P(|delta|) = 10 at |delta| ~ 4.1).
LENGTH_COST_CAP = 10.0
# Half-width of the dynamic-programming band, in verses, around the Spanish
# position that has the English verse's number.
BAND = 12

# ----------------------------------------------------------------------------
# Reading the modules
# ----------------------------------------------------------------------------

KEY_RE = re.compile(r"^(.+) (\d+):(\d+)$")


class BibleError(RuntimeError):
    """A problem the user can fix (missing tool or module)."""


def run_mod2imp(module, package):
    """Return mod2imp's raw export of `module`, or raise BibleError naming
    the Debian package that provides what is missing."""
    try:
        proc = subprocess.run(["mod2imp", module], capture_output=True,
                              check=False)
    except FileNotFoundError:
        raise BibleError(
            "mod2imp not found: install the Debian package "
            f"{MOD2IMP_PACKAGE} (apt-get install {MOD2IMP_PACKAGE})") from None
    out = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0 or "$$$" not in out:
        detail = proc.stderr.decode("utf-8", errors="replace").strip()
        detail = detail.splitlines()[0] if detail else f"exit {proc.returncode}"
        raise BibleError(
            f"SWORD module {module} is not available ({detail}): install the "
            f"Debian package {package} (apt-get install {package})")
    return out


def parse_imp(text):
    """Parse mod2imp output into {(book, chapter, verse): raw OSIS}.

    Keys keep the module's (canonical) order.  Headings ("[ Module Heading ]")
    and book/chapter introductions (chapter or verse 0) are skipped."""
    entries = {}
    key, lines = None, []
    for line in text.split("\n") + ["$$$"]:
        if line.startswith("$$$"):
            if key is not None:
                entries[key] = "\n".join(lines)
            m = KEY_RE.match(line[3:].strip())
            key = None
            if m and int(m.group(2)) > 0 and int(m.group(3)) > 0:
                key = (m.group(1), int(m.group(2)), int(m.group(3)))
            lines = []
        elif key is not None:
            lines.append(line)
    return entries


# ----------------------------------------------------------------------------
# Markup stripping
# ----------------------------------------------------------------------------

# An XML tag; attribute values are quoted and may contain anything but quotes.
TAG_RE = re.compile(r"""<(/?)([A-Za-z][\w:.-]*)((?:[^>"']|"[^"]*"|'[^']*')*?)(/?)>""")
ATTR_RE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
# <w> tags (Strong's numbers) are the bulk of the markup; they are inline.
W_TAG_RE = re.compile(r"</?w(?:\s[^>]*)?>")
# The text of a transChange element without nested markup.
TRANSCHANGE_TEXT_RE = re.compile(r"([^<]*)</transChange>")

# Elements removed together with their content (titles: unless canonical).
DROPPED = {"note", "speaker", "rdg", "figure", "catchWord"}
# Elements that separate words (mostly milestones).
BLOCK = {"l", "lg", "lb", "div", "p", "list", "item", "chapter", "milestone",
         "title", "table", "row", "cell", "head", "verse", "closer",
         "salute", "signed", "inscription"}
# Typographic inline elements, which may cover part of a word: their tags
# are no word boundary.  The tags of other inline elements (w, transChange,
# q, anything unknown), which hold whole words, are possible word
# boundaries (EDGE).
TRANSPARENT = {"hi", "divineName", "foreign", "name", "seg", "abbr"}

# Separator kinds, weakest first: inline tag boundary, removed note, block.
EDGE, NOTE, BREAK = 1, 2, 3
# Marks an inline boundary inside text until resolve_edges settles it (a
# control character that the modules do not use).
EDGE_MARK = "\x01"
# Removed around notes and block boundaries.
SOFT = " \t\r\n" + EDGE_MARK

OPENERS = "([{“‘«‹¿¡"
CLOSERS = ".,;:!?)]}”’»›…"
# Inline boundaries that need a space: a letter/digit after a letter/digit or
# after closing punctuation.
EDGE_SPACE_RE = re.compile(
    rf"(?:(?<=[^\W_])|(?<=[{re.escape(CLOSERS)}])){EDGE_MARK}+(?=[^\W_])")

# Spanish clitic pronouns, alone or combined ("lo", "nos", "selo", "melo").
CLITIC_RE = re.compile(r"(?:me|te|se|nos|os|le|les|lo|la|los|las){1,2}")
# Words that cannot carry an enclitic pronoun; a clitic glued to them in the
# source is a separate (proclitic) word: "no lo hizo", "cuánto nos ayudó".
NON_VERB_HOSTS = {
    "y", "e", "o", "u", "ni", "que", "qué", "no", "como", "cómo", "cuando",
    "si", "sí", "pues", "mas", "más", "pero", "cuanto", "cuánto", "cuán",
    "quien", "quién", "ya", "aún", "también", "así", "él", "ella", "ellos",
    "ellas", "me", "te", "se", "nos", "os", "le", "les", "lo", "la", "los",
    "las", "de", "á", "a", "en", "por", "para", "con", "sin",
}
# Verb forms that take enclitics in the RV: infinitives (-r), imperatives
# (-d, haz), gerunds (-ndo), and finite forms, which in the 1909 spelling
# carry an accent once a pronoun is attached (díjole, llenarálas).
VERB_LIKE_RE = re.compile(r"(?:[rdz]|ndo)$|[áéíóú]", re.IGNORECASE)
SENTENCE_START_AFTER = ".!?:;" + OPENERS


class Chunk:
    """A piece of text from the markup; `clitic` marks a whole transChange
    element made of a Spanish clitic pronoun."""

    __slots__ = ("text", "clitic")

    def __init__(self, text, clitic=False):
        self.text = text
        self.clitic = clitic


def attributes(attr_text):
    """Parse a tag's attribute string into a dict."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in ATTR_RE.finditer(attr_text)}


def is_dropped(name, attrs):
    """Whether an element is removed with its content (notes, headings)."""
    if name == "title":
        return attrs.get("canonical") != "true"
    return name in DROPPED


def tokenize(raw):
    """Turn raw OSIS into a list of Chunk objects and separator kinds.

    Dropped elements are skipped whole (nesting included) and leave a NOTE
    or BREAK separator; block tags give BREAK, other inline tags EDGE.  It
    stops at the end of a book.  For speed, the ubiquitous <w> tags are
    replaced up front by EDGE_MARK inside the text (see resolve_edges)."""
    raw = W_TAG_RE.sub(EDGE_MARK, raw)
    items = []
    pos = 0
    drop_depth = 0          # > 0 while inside a dropped element
    drop_kind = NOTE
    while pos < len(raw):
        m = TAG_RE.search(raw, pos)
        text = raw[pos:m.start()] if m else raw[pos:]
        if text and not drop_depth:
            items.append(Chunk(html.unescape(text) if "&" in text else text))
        if not m:
            break
        pos = m.end()
        closing, name, attr_text, empty = m.groups()
        # Only these elements' attributes matter; parsing all is slow.
        attrs = attributes(attr_text) if name in ("div", "title") else {}
        if drop_depth:
            if not empty:
                drop_depth += -1 if closing else 1
            if not drop_depth:
                items.append(drop_kind)
            continue
        if name == "div" and attrs.get("type") == "book" and "eID" in attrs:
            break
        if not closing and not empty and is_dropped(name, attrs):
            drop_depth = 1
            drop_kind = NOTE if name == "note" else BREAK
            continue
        if name == "transChange" and not closing and not empty:
            clitic = TRANSCHANGE_TEXT_RE.match(raw, pos)
            if clitic and CLITIC_RE.fullmatch(clitic.group(1)):
                items += [EDGE, Chunk(clitic.group(1), clitic=True), EDGE]
                pos = clitic.end()
                continue
        if name not in TRANSPARENT:
            items.append(BREAK if name in BLOCK else EDGE)
    return items


def attaches_enclitic(before, right_glued):
    """Whether a clitic pronoun written right after the text `before` (no
    space between) is an enclitic of the word ending `before` ("díjole",
    "preguntándole") rather than a separate proclitic.

    `right_glued` says whether a word follows the clitic with no space.
    A capitalised host inside a sentence is a name ("Josué los circuncidó",
    "Jehová los acose"); function words never host enclitics ("no lo hizo");
    a clitic followed by space or punctuation is otherwise enclitic ("sácalo
    de", "hazla."); one glued on both sides is enclitic only if the host
    looks like a verb ("condenaros lo digo", "díjole Dios", but "gentes lo
    oyeron")."""
    m = re.search(r"(\w+)$", before)
    if not m:
        return False
    host = m.group(1)
    preceding = before[:m.start()].rstrip()
    sentence_start = not preceding or preceding[-1] in SENTENCE_START_AFTER
    if host[0].isupper() and not sentence_start:
        return False
    if host.lower() in NON_VERB_HOSTS:
        return False
    if not right_glued:
        return True
    return bool(VERB_LIKE_RE.search(host))


def next_text(items, index):
    """The text after items[index] if only inline boundaries (EDGE) lie in
    between, else "" (a stronger separator or the end comes first)."""
    for item in items[index + 1:]:
        if isinstance(item, Chunk):
            return item.text.lstrip(EDGE_MARK)
        if item != EDGE:
            return ""
    return ""


def glued_enclitic(out, items, index):
    """Whether the clitic Chunk items[index] attaches to the text in `out`
    (it has no space before it in the source); see attaches_enclitic."""
    before = "".join(out).rstrip(EDGE_MARK)
    if not before[-1:].isalpha():
        return False
    right_glued = next_text(items, index)[:1].isalnum()
    return attaches_enclitic(before.replace(EDGE_MARK, " "), right_glued)


def join(out, text, sep):
    """Append `text` to the list `out` after a separator of kind `sep`
    (None: adjacent in the source), choosing the spacing.  Inline boundaries
    are only marked here (EDGE_MARK) and settled by resolve_edges."""
    if sep in (NOTE, BREAK):
        while out:                      # whitespace before the boundary goes
            out[-1] = out[-1].rstrip(SOFT)
            if out[-1]:
                break
            out.pop()
        prev = out[-1] if out else ""
        text = text.lstrip(SOFT)
        if prev and text and text[0] not in CLOSERS and prev[-1] not in OPENERS:
            text = " " + text
    elif sep == EDGE:
        text = EDGE_MARK + text
    out.append(text)


def resolve_edges(text):
    """Settle inline boundaries: a space before a letter/digit that follows a
    letter/digit or closing punctuation ("God</w><w>created",
    "it.”</q><w>So"), nothing elsewhere ("God</w>’s", "word</w>.")."""
    return EDGE_SPACE_RE.sub(" ", text).replace(EDGE_MARK, "")


def normalise_space(text):
    """Collapse all whitespace (tabs, newlines, NBSP, line separators) into
    single spaces and trim."""
    return re.sub(r"\s+", " ", text).strip()


# The WEB sets a space between a closing quotation mark and the punctuation
# after it ("‘Take up your mat and walk’ ?”", "receive.’ ”"); plain text
# has none.
QUOTE_SPACE_RE = re.compile(r"(?<=[’”]) +(?=[?!.,;:]|[’”](?!\w))")


def strip_markup(raw):
    """Plain text of one verse's OSIS markup (see the module docstring)."""
    items = tokenize(raw)
    out = []
    sep = None
    for i, item in enumerate(items):
        if not isinstance(item, Chunk):
            sep = item if sep is None else max(sep, item)
            continue
        if sep in (NOTE, BREAK) and not item.text.strip(SOFT):
            continue            # whitespace merges into the boundary
        if item.clitic and sep == EDGE and out and glued_enclitic(out, items, i):
            out[-1] = out[-1].rstrip(EDGE_MARK)
            sep = None
        join(out, item.text, sep)
        sep = None
    text = normalise_space(resolve_edges("".join(out)))
    return QUOTE_SPACE_RE.sub("", text)


def is_empty(text):
    """A verse without any letter or digit (e.g. "—", "[ ]") is empty."""
    return not any(ch.isalnum() for ch in text)


# ----------------------------------------------------------------------------
# Reina-Valera edition features (colophons, drop capitals)
# ----------------------------------------------------------------------------

COLOPHON_RE = re.compile(
    r"^(.*\bAmén\.)\s+((?:.*\W)?(?:[Ee]scrita|[Ee]nviada)\b.*)$")


def cut_colophon(text):
    """Text without an RV colophon ("... Amén. Fué escrita de Roma ...")."""
    m = COLOPHON_RE.match(text)
    return m.group(1) if m else text


def cut_colophons(texts):
    """Cut colophons from the last non-empty verse of each book in the
    {key: text} dict `texts`, in place; return the keys changed."""
    last = {}
    for key, text in texts.items():
        if not is_empty(text):
            last[key[0]] = key
    changed = []
    for key in last.values():
        cut = cut_colophon(texts[key])
        if cut != texts[key]:
            texts[key] = cut
            changed.append(key)
    return changed


# Words (letters only), and words or sentence-ending punctuation.
WORD_RE = re.compile(r"[^\W\d_]+")
SENTENCE_TOKEN_RE = re.compile(r"[^\W\d_]+|[.!?:;]")


def plain_letters(word):
    """Lower-case `word` without diacritics: "Achâb" -> "achab"."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def word_forms(texts):
    """Usual spellings for respelling words printed in capitals: a pair of
    dicts keyed by lower-case word and, as a fallback, by plain_letters.

    The usual spelling is the most frequent one inside sentences: there a
    capital letter marks a name ("Jehová"), not a sentence start
    ("Tornéme").  A word seen only at sentence starts is a common word, in
    lower case.  Words in capitals are not counted."""
    inside = collections.Counter()
    seen = set()
    for text in texts.values():
        sentence_start = True
        for token in SENTENCE_TOKEN_RE.findall(text):
            if token in ".!?:;":
                sentence_start = True
                continue
            if not token.isupper() or len(token) == 1:
                seen.add(token.lower())
                if not sentence_start:
                    inside[token] += 1
            sentence_start = False
    exact = {word: word for word in seen}
    plain = {plain_letters(word): word for word in sorted(seen, reverse=True)}
    for word, _ in reversed(inside.most_common()):
        exact[word.lower()] = plain[plain_letters(word)] = word
    return exact, plain


def usual_spelling(word, forms):
    """The usual spelling of a word printed in capitals (see word_forms):
    "JEHOVÁ" -> "Jehová", "ACHAB" -> "Achâb", unknown words in lower case."""
    exact, plain = forms
    lower = word.lower()
    return exact.get(lower) or plain.get(plain_letters(lower)) or lower


def is_capitals(word):
    """A word of two letters or more, all in capitals ("EN", "JEHOVÁ")."""
    return len(word) >= 2 and word.isupper()


def lower_drop_cap(text, forms):
    """`text` with its drop-cap words spelled as usual: the first run of
    words in capitals (two letters or more, separated by spaces) that is
    followed by a word with lower-case letters.  "EN el principio" -> "En
    el principio", "Y LOS que" -> "Y los que", "LA SEGUNDA suerte" -> "La
    segunda suerte", "ALEPH. BIENAVENTURADOS los" -> "ALEPH. Bienaventurados
    los"; `forms` (see word_forms) gives the usual spelling of names."""
    words = list(WORD_RE.finditer(text))
    for end, following in enumerate(words[1:]):
        if not (is_capitals(words[end].group())
                and any(ch.islower() for ch in following.group())):
            continue
        start = end
        while (start > 0 and is_capitals(words[start - 1].group())
               and not text[words[start - 1].end():words[start].start()].strip()):
            start -= 1
        before = text[:words[start].start()].rstrip(" " + OPENERS)
        sentence_start = not before or before[-1] in ".!?:;"
        pieces = []
        for i in range(start, end + 1):
            word = words[i].group()
            form = usual_spelling(word, forms)
            if i == start and sentence_start:
                form = form[0].upper() + form[1:]
            pieces.append(form + text[words[i].end():words[i + 1].start()])
        head, tail = text[:words[start].start()], text[following.start():]
        return head + "".join(pieces) + tail
    return text


def lower_drop_caps(texts):
    """The RV prints the first word of every chapter in capitals (a drop-cap
    convention the WEB does not share); respell it in verse 1 of each
    chapter of the {key: text} dict, in place.  Return the keys changed."""
    forms = word_forms(texts)
    changed = []
    for key, text in texts.items():
        if key[2] == 1:
            fixed = lower_drop_cap(text, forms)
            if fixed != text:
                texts[key] = fixed
                changed.append(key)
    return changed


# ----------------------------------------------------------------------------
# Alignment
# ----------------------------------------------------------------------------

class LengthModel:
    """Gale-Church length model: l_es ~ c * l_en with variance s2 * length."""

    def __init__(self, c, s2):
        self.c = c
        self.s2 = s2
        self._costs = {}

    @classmethod
    def fit(cls, length_pairs):
        """Estimate c and s2 robustly (median, MAD) from (l_en, l_es)."""
        usable = [(a, b) for a, b in length_pairs if a > 0 and b > 0]
        c = statistics.median(b / a for a, b in usable)
        resid = [(b - c * a) / math.sqrt((a + b / c) / 2) for a, b in usable]
        med = statistics.median(resid)
        mad = statistics.median(abs(r - med) for r in resid)
        return cls(c, max((1.4826 * mad) ** 2, 1e-6))

    def delta(self, l_en, l_es):
        """Standardised length difference; ~N(0,1) for true translations."""
        mean = max((l_en + l_es / self.c) / 2, 1.0)
        return (self.c * l_en - l_es) / math.sqrt(self.s2 * mean)

    def cost(self, l_en, l_es):
        """min(-log P(|delta|), LENGTH_COST_CAP), memoised (the aligner
        asks for the same length pairs many times)."""
        cost = self._costs.get((l_en, l_es))
        if cost is None:
            p = math.erfc(abs(self.delta(l_en, l_es)) / math.sqrt(2))
            cost = min(-math.log(max(p, 1e-300)), LENGTH_COST_CAP)
            self._costs[(l_en, l_es)] = cost
        return cost


def gale_church(model, en, es):
    """Align two sequences of (key, length) by dynamic programming.

    Returns the set of (en key, es key) linked by 1-1 beads.  1-0 and 0-1
    beads pay only their prior: a verse missing on one side says nothing
    about its length.  The search is restricted to a band of +-BAND verses
    around the Spanish position of the English verse's own number, which
    keeps it linear in the book length."""
    es_keys = [k for k, _ in es]
    en_len = [0] + [l for _, l in en]       # 1-based lengths
    es_len = [0] + [l for _, l in es]
    n, m = len(en), len(es)
    best = {(0, 0): (0.0, None)}
    for i in range(n + 1):
        centre = bisect.bisect_left(es_keys, en[i][0]) if i < n else m
        for j in range(max(0, centre - BAND), min(m, centre + BAND) + 1):
            if i == 0 and j == 0:
                continue
            found = None
            for bead, prior in BEAD_COSTS:
                di, dj = bead
                prev = best.get((i - di, j - dj))
                if prev is None:
                    continue
                c = prev[0] + prior
                if di and dj:
                    c += model.cost(sum(en_len[i - di + 1:i + 1]),
                                    sum(es_len[j - dj + 1:j + 1]))
                if found is None or c < found[0]:
                    found = (c, bead)
            if found:
                best[(i, j)] = found
    links = set()
    i, j = n, m
    if (i, j) not in best:          # band too narrow: no alignment evidence
        return links
    while (i, j) != (0, 0):
        di, dj = best[(i, j)][1]
        if (di, dj) == (1, 1):
            links.add((en[i - 1][0], es[j - 1][0]))
        i, j = i - di, j - dj
    return links


def book_order(*modules):
    """Book names in canonical order (first module's order, then others)."""
    order = []
    for entries in modules:
        for book, _, _ in entries:
            if book not in order:
                order.append(book)
    return order


def classify_unpaired(en, es):
    """Split the keys of both modules into candidates (present and
    non-empty in both) and {reason: [key, ...]} for the rest."""
    dropped = collections.defaultdict(list)
    common_books = {b for b, _, _ in en} & {b for b, _, _ in es}
    for key in list(en) + [k for k in es if k not in en]:
        side = "English" if key in en else "Spanish"
        if key[0] not in common_books:
            dropped[f"book only in {side}"].append(key)
        elif key not in en or key not in es:
            dropped[f"verse only in {side}"].append(key)
    candidates = []
    for key in en:
        if key[0] not in common_books or key not in es:
            continue
        if is_empty(en[key]) and is_empty(es[key]):
            dropped["empty in both"].append(key)
        elif is_empty(en[key]):
            dropped["empty in English"].append(key)
        elif is_empty(es[key]):
            dropped["empty in Spanish"].append(key)
        else:
            candidates.append(key)
    return candidates, dropped


def verse_sequences(texts):
    """{book: [((chapter, verse), length), ...]} of the non-empty verses."""
    books = collections.defaultdict(list)
    for key, text in texts.items():
        if not is_empty(text):
            books[key[0]].append((key[1:], len(text)))
    return books


def align(en, es):
    """Pair the plain-text verses {key: text} of both languages.

    Returns (pairs, dropped, model): pairs is a list of (key, en_text,
    es_text) in canonical order, dropped maps a reason to the dropped keys,
    model is the fitted LengthModel.  See the module docstring."""
    candidates, dropped = classify_unpaired(en, es)
    model = LengthModel.fit([(len(en[k]), len(es[k])) for k in candidates])
    seq_en, seq_es = verse_sequences(en), verse_sequences(es)
    links = set()
    for book in book_order(en, es):
        if book in seq_en and book in seq_es:
            links |= {(book,) + a for a, b in
                      gale_church(model, seq_en[book], seq_es[book]) if a == b}
    pairs = []
    for key in candidates:
        if key not in links:
            dropped["numbering shift"].append(key)
        elif abs(model.delta(len(en[key]), len(es[key]))) > MAX_ABS_DELTA:
            dropped["length ratio outlier"].append(key)
        else:
            pairs.append((key, en[key], es[key]))
    return pairs, dict(dropped), model


# ----------------------------------------------------------------------------
# Splitting, reporting, writing
# ----------------------------------------------------------------------------

def split_by_book(pairs, valid_books=VALID_BOOKS, test_books=TEST_BOOKS):
    """{split: [pair, ...]}: whole books held out for validation and test."""
    overlap = set(valid_books) & set(test_books)
    if overlap:
        raise ValueError(f"books both in valid and test: {sorted(overlap)}")
    splits = {name: [] for name in SPLITS}
    for pair in pairs:
        book = pair[0][0]
        name = ("valid" if book in valid_books
                else "test" if book in test_books else "train")
        splits[name].append(pair)
    return splits


def clean_line(text):
    """One sentence per line: no tabs, newlines or other line breaks."""
    line = normalise_space(text)
    if not line:
        raise ValueError("empty sentence")
    return line


def make_report(counts, colophons, drop_caps, pairs, dropped, splits, model):
    """Human-readable summary: sizes, drop reasons with top chapters."""
    lines = ["English-Spanish Bible corpus (examples/data/bible.py)", ""]
    for lang, (module, _) in MODULES.items():
        lines.append(f"verses in {module} ({lang}): {counts[lang]}")
    lines.append(f"Spanish colophons cut: {len(colophons)}; "
                 f"chapter-initial capitals respelled: {len(drop_caps)}")
    lines.append(f"length model: l_es = {model.c:.3f} * l_en, "
                 f"s2 = {model.s2:.2f}; max |delta| = {MAX_ABS_DELTA}")
    lines.append(f"aligned pairs kept: {len(pairs)}")
    lines.append(f"dropped: {sum(len(v) for v in dropped.values())}")
    for reason in sorted(dropped, key=lambda r: (-len(dropped[r]), r)):
        keys = dropped[reason]
        chapters = collections.Counter(f"{k[0]} {k[1]}" for k in keys)
        top = ", ".join(f"{c} ({n})" for c, n in chapters.most_common(8))
        lines.append(f"  {reason}: {len(keys)}  [{top}]")
    lines.append("splits (pairs):")
    for split in SPLITS:
        books = []
        for pair in splits[split]:
            if pair[0][0] not in books:
                books.append(pair[0][0])
        shown = f"{len(books)} books" if split == "train" else ", ".join(books)
        lines.append(f"  {split}: {len(splits[split])}  ({shown})")
    return "\n".join(lines) + "\n"


TMP_PREFIX = ".bible-tmp-"


def write_outputs(out_dir, splits, report):
    """Write the corpus files atomically-ish (see the module docstring)."""
    os.makedirs(out_dir, exist_ok=True)
    report_path = os.path.join(out_dir, "report.txt")
    if os.path.exists(report_path):
        os.remove(report_path)
    for name in os.listdir(out_dir):        # left by a killed earlier run
        if name.startswith(TMP_PREFIX):
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=out_dir)
    try:
        names = []
        for split in SPLITS:
            for lang, column in (("en", 1), ("es", 2)):
                name = f"{split}.{lang}"
                with open(os.path.join(tmp, name), "w", encoding="utf-8",
                          newline="\n") as f:
                    for pair in splits[split]:
                        f.write(clean_line(pair[column]) + "\n")
                names.append(name)
        with open(os.path.join(tmp, "report.txt"), "w", encoding="utf-8",
                  newline="\n") as f:
            f.write(report)
        for name in names + ["report.txt"]:
            os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_module(lang):
    """Export, parse and strip one module: {key: plain text}."""
    module, package = MODULES[lang]
    raw = parse_imp(run_mod2imp(module, package))
    return {key: strip_markup(markup) for key, markup in raw.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Extract a verse-aligned English-Spanish parallel corpus "
                    "(World English Bible / Reina-Valera 1909) from the SWORD "
                    "modules of the Debian packages sword-text-web and "
                    "sword-text-sparv, using mod2imp (libsword-utils).")
    parser.add_argument("--out", default=os.path.join("data", "bible"),
                        help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)

    start = time.monotonic()
    texts = {}
    try:
        for lang in MODULES:
            texts[lang] = read_module(lang)
            print(f"read {MODULES[lang][0]}: {len(texts[lang])} verses")
    except BibleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    colophons = cut_colophons(texts["es"])
    drop_caps = lower_drop_caps(texts["es"])
    pairs, dropped, model = align(texts["en"], texts["es"])
    print(f"aligned {len(pairs)} pairs, dropped "
          f"{sum(len(v) for v in dropped.values())} verses")
    splits = split_by_book(pairs)
    counts = {lang: len(t) for lang, t in texts.items()}
    report = make_report(counts, colophons, drop_caps, pairs, dropped,
                         splits, model)
    write_outputs(args.out, splits, report)
    print(f"wrote {args.out} in {time.monotonic() - start:.1f}s")
    print(report, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
