#!/usr/bin/env python3
"""Reference values for tests/unit/text/bleu_test.cpp and chrf_test.cpp, from the real sacreBLEU.

The inputs below are the ones written in the two tests; the numbers there were printed by this
script with sacreBLEU 2.6.0 (Python 3.11). To regenerate:

    python3 -m venv /tmp/sbvenv && /tmp/sbvenv/bin/pip install sacrebleu==2.6.0
    /tmp/sbvenv/bin/python tests/unit/text/sacrebleu_values.py

Floats are printed with repr(), which round-trips, so the C++ test can compare them tightly.
Strings are printed as C++ literals (UTF-8, with escapes only for control and space characters).
"""

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

TOKENIZER_LINES = [
    "Hello, world! It's 3.5 km (or 1,000 m) away.",
    '"Quoted" text -- with hyphens: well-known, 1990-2000, e-mail; x-5 5-x 5 - 3.',
    "Tom &amp; Jerry &quot;cat&quot; &lt;b&gt; &amp;lt; &amp;quot; &AMP; &amp",
    "<skipped> with <skipped>markers and <skip<skipped>ped>",
    "hyphen-\nated across\nlines -\n end-\n",
    "¿Dónde está el café? ¡Allí, señor! Cuesta 3,50 €.",
    "東京は日本の首都です。人口は1,400万人、面積は2.194km²。",
    "I love it 😀! 👍🏽. (ok)",
    "nbsp\u00a0ideographic\u3000thin\u2009fs\x1cnel\x85zwsp\u200bend",
    "3.5. 1,000, .5 ,5 5. a.b U.S.A. $100.00 -5 5- ... 1..2 a,b,c",
    "Arabic ٣.٥ fullwidth ３,５ superscript ²,³ café. ñ,",
    "\t leading and trailing \r ",
    "",
    "[brackets] {braces} <angles> a|b a~b a^b a_b a`b @user #tag 50% a*b a+b a=b back\\slash",
]

# One reference stream unless a case says otherwise: (hypotheses, [stream, ...]).
CORPUS_HYPS = [
    "The cat sat on the mat.",
    "It costs 3.5 dollars, or about 1,000 yen.",
    '"Hello," she said -- a well-known greeting.',
    "Tom &amp; Jerry &lt;3 each other &gt; everyone.",
    "¿Dónde está la biblioteca? ¡Aquí!",
    "東京は日本の首都です。",
    "I love this 😀 so much!",
    "",
    "The meeting is scheduled for 10:30 a.m. on Monday.",
]
CORPUS_REFS = [
    "The cat is sitting on the mat.",
    "It costs 3.5 dollars, roughly 1,000 yen.",
    '"Hello," she said: a well-known greeting.',
    "Tom & Jerry <3 each other > everyone.",
    "¿Dónde está la biblioteca? ¡Allí!",
    "東京は日本の首都である。",
    "I love this 😀 very much!",
    "Nothing was translated here.",
    "The meeting is scheduled for 10:30 a.m. on Tuesday.",
]

BLEU_CASES = {
    "corpus": (CORPUS_HYPS, [CORPUS_REFS]),
    "short": (["the cat", "a dog barked loudly"],
              [["the cat sat on the mat", "a dog barked loudly at the mailman"]]),
    "no_4gram_match": (["the quick brown cat jumps", "a lazy dog sleeps all day"],
                       [["the quick brown fox jumps", "a lazy cat sleeps all night"]]),
    "no_3gram_match": (["the quick brown fox jumps", "over the lazy dog"],
                       [["the quick fox brown jumps", "the dog over lazy"]]),
    "perfect": (CORPUS_REFS, [CORPUS_REFS]),
    "two_refs": (["the cat sat on the mat", "there is a cat on the mat here", "hello there world"],
                 [["the cat sat on mat", "a cat is on the mat", "hello world"],
                  ["a cat sat on the mat today", "there is a cat on the mat there", "hello there , world"]]),
    "no_match": (["foo bar baz qux"], [["alpha beta gamma delta"]]),
    "shorter_than_4": (["a b c", "d e"], [["a b c", "d e"]]),
    "trailing_space": (["this is a well-\n", "a known fact-\n\u3000", "x\u00a0y z w\u2028", "it -\nworks fine for me"],
                       [["this is a well -", "a known fact -", "x y z w", "it works fine for me"]]),
}

CHRF_CASES = {
    "corpus": (CORPUS_HYPS, [CORPUS_REFS]),
    "short": (BLEU_CASES["short"][0], BLEU_CASES["short"][1]),
    "perfect": (CORPUS_REFS, [CORPUS_REFS]),
    "two_refs": (BLEU_CASES["two_refs"][0], BLEU_CASES["two_refs"][1]),
    "no_match": (["xyz"], [["abc"]]),
    "unicode": (["東京は日本の首都です。", "👍🏽 great", "café crème", "¿Qué\u00a0tal?"],
                [["東京は日本の首都である。", "👍 great!", "cafe creme", "¿Qué tal?"]]),
    "empty_lines": (["abc", "", "abcdefgh"], [["", "abc", "abcdefg h"]]),
    "below_order": (["ab"], [["abc"]]),
}


def cpp_literal(text):
    """A C++ string literal with the UTF-8 of `text`: escapes for controls and non-ASCII spaces."""
    out, escaped_last = [], False
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
            escaped_last = False
        elif ch.isprintable() and not (ord(ch) > 0x7F and ch.isspace()):
            if escaped_last and ch in "0123456789abcdefABCDEF":
                out.append('" "')  # a hex digit would extend the previous \x escape
            out.append(ch)
            escaped_last = False
        else:
            out.append("".join(f"\\x{byte:02X}" for byte in ch.encode("utf-8")))
            escaped_last = True
    return '"' + "".join(out) + '"'


def main():
    print(f"sacreBLEU {sacrebleu.__version__}")
    print("\n# tokenize_13a")
    tokenizer = Tokenizer13a()
    for line in TOKENIZER_LINES:
        print(f"{cpp_literal(line)} -> {cpp_literal(tokenizer(line))}")

    print("\n# corpus_bleu (default: 13a, exp smoothing, mixed case)")
    for name, (hyps, refs) in BLEU_CASES.items():
        score = BLEU().corpus_score(hyps, refs)
        print(f"{name}: {score}")
        print(f"  score={score.score!r} bp={score.bp!r} ratio={score.ratio!r}")
        print(f"  precisions={[repr(p) for p in score.precisions]}")
        print(f"  counts={score.counts} totals={score.totals} sys_len={score.sys_len} ref_len={score.ref_len}")

    print("\n# corpus_chrf (default: chrF2, char order 6, word order 0)")
    for name, (hyps, refs) in CHRF_CASES.items():
        metric = CHRF()
        score = metric.corpus_score(hyps, refs)
        # The summed [hyp, ref, match] statistics per order; private API, for the counts only.
        stats = [sum(column) for column in zip(*metric._extract_corpus_statistics(hyps, refs))]
        print(f"{name}: {score}  score={score.score!r}")
        print(f"  hyp={stats[0::3]} ref={stats[1::3]} match={stats[2::3]}")


if __name__ == "__main__":
    main()
