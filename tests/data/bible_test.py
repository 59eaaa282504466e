#!/usr/bin/env python3
"""Tests for examples/data/bible.py: markup stripping, alignment and
misalignment detection, splitting by books, output writing.

Standard library only; the SWORD modules are not needed: the raw entries
below are copied from ``mod2imp engWEB2015eb`` and ``mod2imp spaRV1909eb``
(a few long ones shortened where noted).  Run from the repository root:

    python3 tests/data/bible_test.py

Prints each test as it runs; exits non-zero if any fails.
"""

import contextlib
import importlib.util
import io
import os
import random
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "data", "bible.py")


def load_script():
    """Import examples/data/bible.py as a module from its path (without
    leaving a __pycache__ next to it)."""
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("bible", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bible = load_script()

# (raw OSIS entry, expected plain text), copied from the modules.
EN_CASES = [
    # Genesis 1:1: words glued in the source (God</w><w>created) and a footnote
    (
        '<w lemma="strong:H0430">In</w> <w lemma="strong:H0853">the</w>'
        ' <w lemma="strong:H7225">beginning</w>, <w '
        'lemma="strong:H0430">God</w><note placement="foot"><reference '
        'type="annotateRef">1:1 </reference>The Hebrew word rendered '
        '“God” is “אֱלֹהִ֑ים” (Elohim).</note><w lemma="strong:H1254">'
        'created</w> <w lemma="strong:H0853">the</w> <w '
        'lemma="strong:H8064">heavens</w> <w lemma="strong:H0430">'
        'and</w> <w lemma="strong:H0853">the</w> <w '
        'lemma="strong:H0776">earth</w>.'
        ,
        'In the beginning, God created the heavens and the earth.',
    ),
    # Psalms 3:1: canonical psalm title kept; preverse milestones; poetry
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv4877"/>'
        '<title canonical="true" type="psalm">A Psalm by David, when '
        'he fled from Absalom his son.</title> <lg sID="gen7860"/> <l '
        'level="1" sID="gen7861"/><div type="x-milestone" '
        'subType="x-preverse" eID="pv4877"/>Yahweh, how <w '
        'lemma="strong:H1732">my</w> adversaries <w '
        'lemma="strong:H1121">have</w> increased!<l eID="gen7861" '
        'level="1"/> <l level="2" sID="gen7862"/>Many <w '
        'lemma="strong:H1121">are</w> <w lemma="strong:H1121">those</w>'
        ' <w lemma="strong:H1121">who</w> rise <w lemma="strong:H1121">'
        'up</w> <w lemma="strong:H6440">against</w> <w '
        'lemma="strong:H6440">me</w>. <l eID="gen7862" level="2"/>'
        ,
        'A Psalm by David, when he fled from Absalom his son. Yahweh,'
        ' how my adversaries have increased! Many are those who rise '
        'up against me.',
    ),
    # Psalms 42:8: footnote glued to both words: Yahweh<note/><w>will
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv5480"/>'
        '<lb type="x-p"/> <l level="1" sID="gen9297"/><div '
        'type="x-milestone" subType="x-preverse" eID="pv5480"/>'
        'Yahweh<note placement="foot"><reference type="annotateRef">'
        '42:8 </reference>“Yahweh” is God’s proper Name, sometimes '
        'rendered “LORD” (all caps) in other translations.</note><w '
        'lemma="strong:H6963">will</w> <w lemma="strong:H5921">'
        'command</w> <w lemma="strong:H3605">his</w> loving kindness '
        '<w lemma="strong:H5921">in</w> <w lemma="strong:H3605">the</w>'
        ' daytime.<l eID="gen9297" level="1"/> <l level="2" '
        'sID="gen9298"/><w lemma="strong:H5921">In</w> <w '
        'lemma="strong:H3605">the</w> night <w lemma="strong:H3605">'
        'his</w> song shall <w lemma="strong:H6963">be</w> <w '
        'lemma="strong:H0413">with</w> <w lemma="strong:H0413">me</w>'
        ':<l eID="gen9298" level="2"/> <l level="2" sID="gen9299"/><w '
        'lemma="strong:H7121">a</w> prayer <w lemma="strong:H0413">'
        'to</w> <w lemma="strong:H3605">the</w> <w '
        'lemma="strong:H0413">God</w> <w lemma="strong:H6963">of</w> '
        '<w lemma="strong:H3605">my</w> life. <l eID="gen9299" '
        'level="2"/>'
        ,
        'Yahweh will command his loving kindness in the daytime. In '
        'the night his song shall be with me: a prayer to the God of '
        'my life.',
    ),
    # Luke 12:6: footnote between spaces before "?"
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv14617"/>'
        '<div sID="gen32746" type="x-p"/> <div type="x-milestone" '
        'subType="x-preverse" eID="pv14617"/> <q marker="" who="Jesus">'
        '“<w lemma="strong:G3756">Aren’t</w> <w lemma="strong:G4002">'
        'five</w> <w lemma="strong:G4765">sparrows</w> <w '
        'lemma="strong:G4453">sold</w> <w lemma="strong:G1520">for</w> '
        '<w lemma="strong:G1417">two</w> assaria coins</q> <note '
        'placement="foot"><reference type="annotateRef">12:6 '
        '</reference>An assarion was a small copper coin worth about '
        'an hour’s wages for an agricultural laborer.</note> <q '
        'marker="" who="Jesus">? <w lemma="strong:G3756">Not</w> <w '
        'lemma="strong:G1520">one</w> <w lemma="strong:G1537">of</w> '
        '<w lemma="strong:G0846">them</w> <w lemma="strong:G1510">'
        'is</w> <w lemma="strong:G1950">forgotten</w> <w '
        'lemma="strong:G1537">by</w> <w lemma="strong:G2316">God</w>. '
        '</q>'
        ,
        '“Aren’t five sparrows sold for two assaria coins? Not one of'
        ' them is forgotten by God.',
    ),
    # John 13:26: a word right after a closing quote: .”</q><w>So
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv15022"/>'
        '<div sID="gen33906" type="x-p"/><div type="x-milestone" '
        'subType="x-preverse" eID="pv15022"/><w lemma="strong:G2424">'
        'Jesus</w> <w lemma="strong:G3767">therefore</w> <w '
        'lemma="strong:G0611">answered</w>, <q marker="" who="Jesus">'
        '“<w lemma="strong:G0846">It</w> <w lemma="strong:G1510">is</w>'
        ' <w lemma="strong:G2532">he</w> <w lemma="strong:G2532">to</w>'
        ' <w lemma="strong:G3739">whom</w> <w lemma="strong:G1473">'
        'I</w> <w lemma="strong:G1510">will</w> <w '
        'lemma="strong:G1325">give</w> <w lemma="strong:G3588">this</w>'
        ' piece <w lemma="strong:G3588">of</w> bread <w '
        'lemma="strong:G2532">when</w> <w lemma="strong:G1473">I</w> '
        '<w lemma="strong:G1510">have</w> <w lemma="strong:G0911">'
        'dipped</w> <w lemma="strong:G0846">it</w>.”</q><w '
        'lemma="strong:G3767">So</w> <w lemma="strong:G2532">when</w> '
        '<w lemma="strong:G2532">he</w> <w lemma="strong:G2424">had</w>'
        ' <w lemma="strong:G0911">dipped</w> <w lemma="strong:G3588">'
        'the</w> piece <w lemma="strong:G3588">of</w> bread, <w '
        'lemma="strong:G2532">he</w> <w lemma="strong:G1325">gave</w> '
        '<w lemma="strong:G0846">it</w> <w lemma="strong:G2532">to</w> '
        '<w lemma="strong:G2455">Judas</w>, <w lemma="strong:G3588">'
        'the</w> son <w lemma="strong:G3588">of</w> <w '
        'lemma="strong:G4613">Simon</w> <w lemma="strong:G2469">'
        'Iscariot</w>.'
        ,
        'Jesus therefore answered, “It is he to whom I will give this'
        ' piece of bread when I have dipped it.” So when he had '
        'dipped the piece of bread, he gave it to Judas, the son of '
        'Simon Iscariot.',
    ),
    # II Kings 17:27: footnote with a nested <catchWord>
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv2999"/>'
        '<div sID="gen4469" type="x-p"/><div type="x-milestone" '
        'subType="x-preverse" eID="pv2999"/><w lemma="strong:H0853">'
        'Then</w> <w lemma="strong:H0853">the</w> <w '
        'lemma="strong:H4428">king</w> <w lemma="strong:H4428">of</w> '
        '<w lemma="strong:H0804">Assyria</w> <w lemma="strong:H6680">'
        'commanded</w>, <w lemma="strong:H0559">saying</w>, “<w '
        'lemma="strong:H1540">Carry</w> <w lemma="strong:H8033">'
        'there</w> <w lemma="strong:H0259">one</w> <w '
        'lemma="strong:H4428">of</w> <w lemma="strong:H0853">the</w> '
        '<w lemma="strong:H3548">priests</w> <w lemma="strong:H0834">'
        'whom</w> <w lemma="strong:H0834">you</w> brought <w '
        'lemma="strong:H0776">from</w> <w lemma="strong:H8033">'
        'there</w>; <w lemma="strong:H0430">and</w> <w '
        'lemma="strong:H1540">let</w> <w lemma="strong:H0853">him</w>'
        '<note placement="foot"><reference type="annotateRef">17:27 '
        '</reference>Hebrew: <catchWord>them</catchWord></note> <w '
        'lemma="strong:H1540">go</w> <w lemma="strong:H0430">and</w> '
        '<w lemma="strong:H3427">dwell</w> <w lemma="strong:H8033">'
        'there</w>, <w lemma="strong:H0430">and</w> <w '
        'lemma="strong:H1540">let</w> <w lemma="strong:H0853">him</w> '
        '<w lemma="strong:H3384">teach</w> <w lemma="strong:H0853">'
        'them</w> <w lemma="strong:H0853">the</w> law <w '
        'lemma="strong:H4428">of</w> <w lemma="strong:H0853">the</w> '
        '<w lemma="strong:H0430">god</w> <w lemma="strong:H4428">of</w>'
        ' <w lemma="strong:H0853">the</w> <w lemma="strong:H0776">'
        'land</w>.” <div eID="gen4469" type="x-p"/>'
        ,
        'Then the king of Assyria commanded, saying, “Carry there one'
        ' of the priests whom you brought from there; and let him go '
        'and dwell there, and let him teach them the law of the god '
        'of the land.”',
    ),
    # Song of Solomon 1:2: <speaker> heading dropped
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv8242"/>'
        '<speaker>Beloved</speaker> <lg sID="gen15617"/> <l level="1" '
        'sID="gen15618"/><div type="x-milestone" subType="x-preverse" '
        'eID="pv8242"/>Let <w lemma="strong:H3588">him</w> kiss <w '
        'lemma="strong:H3588">me</w> <w lemma="strong:H6310">with</w> '
        '<w lemma="strong:H3588">the</w> <w lemma="strong:H5390">'
        'kisses</w> <w lemma="strong:H6310">of</w> <w '
        'lemma="strong:H3588">his</w> <w lemma="strong:H6310">mouth</w>'
        ';<l eID="gen15618" level="1"/> <l level="2" sID="gen15619"/>'
        '<w lemma="strong:H3588">for</w> <w lemma="strong:H3588">'
        'your</w> <w lemma="strong:H1730">love</w> <w '
        'lemma="strong:H2896">is</w> <w lemma="strong:H2896">better</w>'
        ' <w lemma="strong:H2896">than</w> <w lemma="strong:H3196">'
        'wine</w>. <l eID="gen15619" level="2"/>'
        ,
        'Let him kiss me with the kisses of his mouth; for your love '
        'is better than wine.',
    ),
    # Psalms 118:22: footnote with a nested <rdg>, before a line end
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv6785"/><l '
        'level="1" sID="gen12381"/> <div type="x-milestone" '
        'subType="x-preverse" eID="pv6785"/> <w lemma="strong:H1129">'
        'The</w> <w lemma="strong:H0068">stone</w> <w '
        'lemma="strong:H3988">which</w> <w lemma="strong:H1129">the</w>'
        ' <w lemma="strong:H1129">builders</w> <w lemma="strong:H3988">'
        'rejected</w> <l eID="gen12381" level="1"/> <l level="2" '
        'sID="gen12382"/><w lemma="strong:H1961">has</w> <w '
        'lemma="strong:H1961">become</w> <w lemma="strong:H1129">'
        'the</w> <w lemma="strong:H6438">cornerstone</w>.<note '
        'placement="foot"><reference type="annotateRef">118:22 '
        '</reference>Literally, <rdg type="alternate">head of the '
        'corner</rdg></note><l eID="gen12382" level="2"/>'
        ,
        'The stone which the builders rejected has become the '
        'cornerstone.',
    ),
    # Ecclesiastes 3:2: poetry: "born,<l eID/> <l sID/>and" must not glue
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv8184"/>'
        '<lg sID="gen15470"/> <l level="1" sID="gen15471"/><div '
        'type="x-milestone" subType="x-preverse" eID="pv8184"/><w '
        'lemma="strong:H3205">a</w> <w lemma="strong:H6256">time</w> '
        '<w lemma="strong:H4191">to</w> <w lemma="strong:H4191">be</w> '
        '<w lemma="strong:H3205">born</w>,<l eID="gen15471" level="1"/>'
        ' <l level="2" sID="gen15472"/><w lemma="strong:H4191">and</w> '
        '<w lemma="strong:H3205">a</w> <w lemma="strong:H6256">time</w>'
        ' <w lemma="strong:H4191">to</w> <w lemma="strong:H4191">'
        'die</w>;<l eID="gen15472" level="2"/> <l level="1" '
        'sID="gen15473"/><w lemma="strong:H3205">a</w> <w '
        'lemma="strong:H6256">time</w> <w lemma="strong:H4191">to</w> '
        '<w lemma="strong:H5193">plant</w>,<l eID="gen15473" '
        'level="1"/> <l level="2" sID="gen15474"/><w '
        'lemma="strong:H4191">and</w> <w lemma="strong:H3205">a</w> <w '
        'lemma="strong:H6256">time</w> <w lemma="strong:H4191">to</w> '
        'pluck up <w lemma="strong:H6256">that</w> which <w '
        'lemma="strong:H4191">is</w> <w lemma="strong:H5193">'
        'planted</w>; <l eID="gen15474" level="2"/>'
        ,
        'a time to be born, and a time to die; a time to plant, and a'
        ' time to pluck up that which is planted;',
    ),
    # Matthew 4:4: <q> text kept, cross-reference note dropped
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv13795"/>'
        '<div sID="gen30325" type="x-p"/><div type="x-milestone" '
        'subType="x-preverse" eID="pv13795"/><w lemma="strong:G1161">'
        'But</w> <w lemma="strong:G3004">he</w> <w '
        'lemma="strong:G0611">answered</w>, <q marker="" who="Jesus">'
        '“<w lemma="strong:G1223">It</w> <w lemma="strong:G2316">is</w>'
        ' <w lemma="strong:G1125">written</w>, ‘<w '
        'lemma="strong:G0444">Man</w> <w lemma="strong:G0444">shall</w>'
        ' <w lemma="strong:G3756">not</w> <w lemma="strong:G2198">'
        'live</w> <w lemma="strong:G1223">by</w> <w '
        'lemma="strong:G0740">bread</w> <w lemma="strong:G3441">'
        'alone</w>, <w lemma="strong:G1161">but</w> <w '
        'lemma="strong:G1223">by</w> <w lemma="strong:G3956">every</w> '
        '<w lemma="strong:G4487">word</w> <w lemma="strong:G3004">'
        'that</w> <w lemma="strong:G1607">proceeds</w> <w '
        'lemma="strong:G1607">out</w> <w lemma="strong:G1223">of</w> '
        '<w lemma="strong:G2316">God’s</w> <w lemma="strong:G4750">'
        'mouth</w>.’”</q><note type="crossReference"><reference '
        'subType="x-origin" type="annotateRef">4:4 </reference>'
        '<reference>Deuteronomy 8:3</reference></note><div '
        'eID="gen30325" type="x-p"/>'
        ,
        'But he answered, “It is written, ‘Man shall not live by '
        'bread alone, but by every word that proceeds out of God’s '
        'mouth.’”',
    ),
    # Revelation of John 22:21: book end: the glossary after it is dropped
    # (shortened after the glossary's first item; the real entry is 26 kB)
    (
        '<div type="x-milestone" subType="x-preverse" sID="pv16039"/>'
        '<div sID="gen35836" type="x-p"/><div type="x-milestone" '
        'subType="x-preverse" eID="pv16039"/><w lemma="strong:G3956">'
        'The</w> <w lemma="strong:G5485">grace</w> <w '
        'lemma="strong:G5485">of</w> <w lemma="strong:G3956">the</w> '
        '<w lemma="strong:G2962">Lord</w> <w lemma="strong:G2424">'
        'Jesus</w> <w lemma="strong:G2962">Christ</w> <w '
        'lemma="strong:G3956">be</w> <w lemma="strong:G3326">with</w> '
        '<w lemma="strong:G3956">all</w> <w lemma="strong:G3956">'
        'the</w> saints. Amen.  <chapter eID="Rev.22"/><div '
        'eID="gen35836" type="x-p"/> <div canonical="true" '
        'eID="gen35575" osisID="Rev" type="book"/> <div sID="gen35837" '
        'type="glossary"/> <milestone n="Glossary" type="x-usfm-h"/> '
        '<milestone n="World English Bible Glossary" '
        'type="x-usfm-toc1"/> <milestone n="Glossary" '
        'type="x-usfm-toc2"/> <milestone n="Glo" type="x-usfm-toc3"/> '
        '<title level="1" type="main">World English Bible '
        'Glossary</title> <div sID="gen35838" type="introduction"/> '
        '<div sID="gen35839" type="x-p"/> The following words used in '
        'the World English Bible (WEB) are not very common, either '
        'because they refer to ancient weights, measures, or money, or '
        'because they are in some way unique to the Bible.<div '
        'eID="gen35839" type="x-p"/> <list> <item '
        'subType="x-introduction" type="x-indent-1"><seg '
        'type="keyword">Abaddon</seg> Abaddon is Hebrew for '
        'destruction.</item>'
        ,
        'The grace of the Lord Jesus Christ be with all the saints. '
        'Amen.',
    ),
]

ES_CASES = [
    # Genesis 2:12: glued transChange: allí</w><tc>también</tc><w>bdelio
    (
        '<w lemma="strong:H2091">Y el oro</w> <w lemma="strong:H1931">'
        'de aquella</w> <w lemma="strong:H0776">tierra</w> <w '
        'lemma="strong:H2896">es bueno</w>: <w lemma="strong:H8033">'
        'hay allí</w><transChange type="added">también</transChange><w '
        'lemma="strong:H0916">bdelio</w> <w lemma="strong:H0068">y '
        'piedra</w> <w lemma="strong:H7718">cornerina</w>.'
        ,
        'Y el oro de aquella tierra es bueno: hay allí también bdelio'
        ' y piedra cornerina.',
    ),
    # I Kings 3:5: enclitic on a verb, then a name: díjo<tc>le</tc>Dios
    (
        '<w lemma="strong:H7200">Y aparecióse</w> <w '
        'lemma="strong:H3068">Jehová</w> <w lemma="strong:H8010">á '
        'Salomón</w> <w lemma="strong:H1391">en Gabaón</w> <w '
        'lemma="strong:H3915">una noche</w> <w lemma="strong:H2472">en '
        'sueños</w>, <w lemma="strong:H0559">y díjo</w><transChange '
        'type="added">le</transChange><w lemma="strong:H0430">Dios</w>'
        ': <w lemma="strong:H7592">Pide</w> <w lemma="strong:H4100">lo '
        'que</w><transChange type="added">quisieres que</transChange>'
        '<w lemma="strong:H5414">yo te dé</w>.'
        ,
        'Y aparecióse Jehová á Salomón en Gabaón una noche en sueños,'
        ' y díjole Dios: Pide lo que quisieres que yo te dé.',
    ),
    # Joshua 5:4: proclitic after a name: Josué<tc>los</tc> circuncidó
    (
        '<w lemma="strong:H2088">Esta</w> <w lemma="strong:H1697">es '
        'la causa</w> <w lemma="strong:H0834">por la cual</w> <w '
        'lemma="strong:H3091">Josué</w><transChange type="added">'
        'los</transChange> circuncidó: <w lemma="strong:H3605">todo</w>'
        ' <w lemma="strong:H5971">el pueblo</w> <w '
        'lemma="strong:H3318">que había salido</w> <w '
        'lemma="strong:H4714">de Egipto</w>, <w lemma="strong:H2145">'
        'los varones</w>, <w lemma="strong:H3605">todos</w> <w '
        'lemma="strong:H0582">los hombres</w> <w lemma="strong:H4421">'
        'de guerra</w>, <w lemma="strong:H4191">habían muerto</w> <w '
        'lemma="strong:H4057">en el desierto</w> <w '
        'lemma="strong:H1870">por el camino</w>, <w '
        'lemma="strong:H3318">después que salieron</w> <w '
        'lemma="strong:H4714">de Egipto</w>.'
        ,
        'Esta es la causa por la cual Josué los circuncidó: todo el '
        'pueblo que había salido de Egipto, los varones, todos los '
        'hombres de guerra, habían muerto en el desierto por el '
        'camino, después que salieron de Egipto.',
    ),
    # I Chronicles 10:13: enclitic on plain text: preguntándo<tc>le</tc>,
    (
        '<w lemma="strong:H4191">Así murió</w> <w lemma="strong:H7586">'
        'Saúl</w> <w lemma="strong:H4604">por su rebelión</w> <w '
        'lemma="strong:H0834">con que</w> <w lemma="strong:H4603">'
        'prevaricó</w> <w lemma="strong:H3068">contra Jehová</w>, <w '
        'lemma="strong:H5921">contra</w> <w lemma="strong:H1697">la '
        'palabra</w> <w lemma="strong:H3068">de Jehová</w>, <w '
        'lemma="strong:H0834">la cual</w> <w lemma="strong:H3808">'
        'no</w> <w lemma="strong:H8104">guardó</w>; <w '
        'lemma="strong:H1571">y porque</w> <w lemma="strong:H1875">'
        'consultó</w> <w lemma="strong:H0178">al pythón</w>, '
        'preguntándo<transChange type="added">le</transChange>,'
        ,
        'Así murió Saúl por su rebelión con que prevaricó contra '
        'Jehová, contra la palabra de Jehová, la cual no guardó; y '
        'porque consultó al pythón, preguntándole,',
    ),
    # II Timothy 1:18: proclitic, glued both sides: cuánto<tc>nos</tc>ayudó
    (
        '<w lemma="strong:G1325 G0846">Déle</w> <w '
        'lemma="strong:G3588">el</w> <w lemma="strong:G2962">Señor</w> '
        '<w lemma="strong:G2147">que halle</w> <w lemma="strong:G1656">'
        'misericordia</w> <w lemma="strong:G3844">cerca</w> <w '
        'lemma="strong:G2962">del Señor</w> <w lemma="strong:G1722">'
        'en</w> <w lemma="strong:G1565">aquel</w> <w '
        'lemma="strong:G2250">día</w>. <w lemma="strong:G2532">Y</w> '
        '<w lemma="strong:G3745">cuánto</w><transChange type="added">'
        'nos</transChange><w lemma="strong:G1247">ayudó</w> <w '
        'lemma="strong:G1722">en</w> <w lemma="strong:G2179">Efeso</w>'
        ', <w lemma="strong:G4771">tú</w> <w lemma="strong:G1097">lo '
        'sabes</w> <w lemma="strong:G0957">mejor</w>. <chapter '
        'eID="2Tim.1"/><div eID="gen1182" type="x-p"/>'
        ,
        'Déle el Señor que halle misericordia cerca del Señor en '
        'aquel día. Y cuánto nos ayudó en Efeso, tú lo sabes mejor.',
    ),
    # Psalms 110:6: enclitic, glued both sides: llenará<tc>las</tc>de
    (
        '<w lemma="strong:H1777">Juzgará</w> <w lemma="strong:H5921">'
        'en</w> <w lemma="strong:H1471">las gentes</w>, <w '
        'lemma="strong:H4390">llenará</w><transChange type="added">'
        'las</transChange><w lemma="strong:H1472">de cadáveres</w>: <w '
        'lemma="strong:H7218">herirá las cabezas</w> <w '
        'lemma="strong:H5921">en</w> <w lemma="strong:H7227">muchas</w>'
        ' <w lemma="strong:H0776">tierras</w>.'
        ,
        'Juzgará en las gentes, llenarálas de cadáveres: herirá las '
        'cabezas en muchas tierras.',
    ),
    # Ezra 2:2: glued conjunction: Rehum<tc>y</tc>Baana
    (
        '<w lemma="strong:H0935">Los cuales vinieron</w> <w '
        'lemma="strong:H5973">con</w> <w lemma="strong:H2216">'
        'Zorobabel</w>, <w lemma="strong:H3442">Jesuá</w>, <w '
        'lemma="strong:H5166">Nehemías</w>, <w lemma="strong:H8304">'
        'Seraías</w>, <w lemma="strong:H7480">Reelaías</w>, <w '
        'lemma="strong:H4782">Mardochêo</w>, <w lemma="strong:H1114">'
        'Bilsán</w>, <w lemma="strong:H4558">Mispar</w>, <w '
        'lemma="strong:H0902">Bigvai</w>, <w lemma="strong:H7348">'
        'Rehum</w><transChange type="added">y</transChange><w '
        'lemma="strong:H1196">Baana</w>. <w lemma="strong:H4557">La '
        'cuenta</w> <w lemma="strong:H0582">de los varones</w> <w '
        'lemma="strong:H5971">del pueblo</w> <w lemma="strong:H3478">'
        'de Israel</w>:'
        ,
        'Los cuales vinieron con Zorobabel, Jesuá, Nehemías, Seraías,'
        ' Reelaías, Mardochêo, Bilsán, Mispar, Bigvai, Rehum y Baana.'
        ' La cuenta de los varones del pueblo de Israel:',
    ),
    # Psalms 3:1: psalm title is part of verse 1; ¡ ! kept
    (
        '<w lemma="strong:H4210">Salmo</w> <w lemma="strong:H1732">de '
        'David</w>, <w lemma="strong:H1272">cuando huía</w> <w '
        'lemma="strong:H6440">de delante</w> <w lemma="strong:H0053">'
        'de Absalom</w> <w lemma="strong:H1121">su hijo</w>. ¡<w '
        'lemma="strong:H1121">OH</w> <w lemma="strong:H3068">Jehová</w>'
        ', <w lemma="strong:H4100">cuánto se</w> <w '
        'lemma="strong:H7231">han multiplicado</w> <w '
        'lemma="strong:H6862">mis enemigos</w>! <w '
        'lemma="strong:H7227">muchos</w> <w lemma="strong:H4100">se</w>'
        ' <w lemma="strong:H6965">levantan</w> <w lemma="strong:H5921">'
        'contra</w> mí.'
        ,
        'Salmo de David, cuando huía de delante de Absalom su hijo. '
        '¡OH Jehová, cuánto se han multiplicado mis enemigos! muchos '
        'se levantan contra mí.',
    ),
]


# Jonah, both languages, as strip_markup gives it.  The RV numbers Jonah 2
# like the Hebrew: its 2:1 is the WEB's 1:17 (its own 1:17 is empty), so all
# of chapter 2 is shifted by one verse.
JONAH_EN = {
    (1, 1): 'Now Yahweh’s word came to Jonah the son of Amittai, saying,',
    (1, 2):
        '“Arise, go to Nineveh, that great city, and preach against '
        'it, for their wickedness has come up before me.”',
    (1, 3):
        'But Jonah rose up to flee to Tarshish from the presence of '
        'Yahweh. He went down to Joppa, and found a ship going to '
        'Tarshish; so he paid its fare, and went down into it, to go '
        'with them to Tarshish from the presence of Yahweh.',
    (1, 4):
        'But Yahweh sent out a great wind on the sea, and there was a'
        ' mighty storm on the sea, so that the ship was likely to '
        'break up.',
    (1, 5):
        'Then the mariners were afraid, and every man cried to his '
        'god. They threw the cargo that was in the ship into the sea '
        'to lighten the ship. But Jonah had gone down into the '
        'innermost parts of the ship and he was laying down, and was '
        'fast asleep.',
    (1, 6):
        'So the ship master came to him, and said to him, “What do '
        'you mean, sleeper? Arise, call on your God! Maybe your God '
        'will notice us, so that we won’t perish.”',
    (1, 7):
        'They all said to each other, “Come! Let’s cast lots, that we'
        ' may know who is responsible for this evil that is on us.” '
        'So they cast lots, and the lot fell on Jonah.',
    (1, 8):
        'Then they asked him, “Tell us, please, for whose cause this '
        'evil is on us. What is your occupation? Where do you come '
        'from? What is your country? Of what people are you?”',
    (1, 9):
        'He said to them, “I am a Hebrew, and I fear Yahweh, the God '
        'of heaven, who has made the sea and the dry land.”',
    (1, 10):
        'Then the men were exceedingly afraid, and said to him, “What'
        ' have you done?” For the men knew that he was fleeing from '
        'the presence of Yahweh, because he had told them.',
    (1, 11):
        'Then they said to him, “What shall we do to you, that the '
        'sea may be calm to us?” For the sea grew more and more '
        'stormy.',
    (1, 12):
        'He said to them, “Take me up, and throw me into the sea. '
        'Then the sea will be calm for you; for I know that because '
        'of me this great storm is on you.”',
    (1, 13):
        'Nevertheless the men rowed hard to get them back to the '
        'land; but they could not, for the sea grew more and more '
        'stormy against them.',
    (1, 14):
        'Therefore they cried to Yahweh, and said, “We beg you, '
        'Yahweh, we beg you, don’t let us die for this man’s life, '
        'and don’t lay on us innocent blood; for you, Yahweh, have '
        'done as it pleased you.”',
    (1, 15):
        'So they took up Jonah and threw him into the sea; and the '
        'sea ceased its raging.',
    (1, 16):
        'Then the men feared Yahweh exceedingly; and they offered a '
        'sacrifice to Yahweh and made vows.',
    (1, 17):
        'Yahweh prepared a huge fish to swallow up Jonah, and Jonah '
        'was in the belly of the fish three days and three nights.',
    (2, 1): 'Then Jonah prayed to Yahweh, his God, out of the fish’s belly.',
    (2, 2):
        'He said, “I called because of my affliction to Yahweh. He '
        'answered me. Out of the belly of Sheol I cried. You heard my'
        ' voice.',
    (2, 3):
        'For you threw me into the depths, in the heart of the seas. '
        'The flood was all around me. All your waves and your billows'
        ' passed over me.',
    (2, 4):
        'I said, ‘I have been banished from your sight; yet I will '
        'look again toward your holy temple.’',
    (2, 5):
        'The waters surrounded me, even to the soul. The deep was '
        'around me. The weeds were wrapped around my head.',
    (2, 6):
        'I went down to the bottoms of the mountains. The earth '
        'barred me in forever; yet you have brought my life up from '
        'the pit, Yahweh my God.',
    (2, 7):
        '“When my soul fainted within me, I remembered Yahweh. My '
        'prayer came in to you, into your holy temple.',
    (2, 8): 'Those who regard vain idols forsake their own mercy.',
    (2, 9):
        'But I will sacrifice to you with the voice of thanksgiving. '
        'I will pay that which I have vowed. Salvation belongs to '
        'Yahweh.”',
    (2, 10):
        'Then Yahweh spoke to the fish, and it vomited out Jonah on '
        'the dry land.',
    (3, 1): 'Yahweh’s word came to Jonah the second time, saying,',
    (3, 2):
        '“Arise, go to Nineveh, that great city, and preach to it the'
        ' message that I give you.”',
    (3, 3):
        'So Jonah arose, and went to Nineveh, according to Yahweh’s '
        'word. Now Nineveh was an exceedingly great city, three days’'
        ' journey across.',
    (3, 4):
        'Jonah began to enter into the city a day’s journey, and he '
        'cried out, and said, “In forty days, Nineveh will be '
        'overthrown!”',
    (3, 5):
        'The people of Nineveh believed God; and they proclaimed a '
        'fast and put on sackcloth, from their greatest even to their'
        ' least.',
    (3, 6):
        'The news reached the king of Nineveh, and he arose from his '
        'throne, took off his royal robe, covered himself with '
        'sackcloth, and sat in ashes.',
    (3, 7):
        'He made a proclamation and published through Nineveh by the '
        'decree of the king and his nobles, saying, “Let neither man '
        'nor animal, herd nor flock, taste anything; let them not '
        'feed, nor drink water;',
    (3, 8):
        'but let them be covered with sackcloth, both man and animal,'
        ' and let them cry mightily to God. Yes, let them turn '
        'everyone from his evil way and from the violence that is in '
        'his hands.',
    (3, 9):
        'Who knows whether God will not turn and relent, and turn '
        'away from his fierce anger, so that we might not perish?”',
    (3, 10):
        'God saw their works, that they turned from their evil way. '
        'God relented of the disaster which he said he would do to '
        'them, and he didn’t do it.',
    (4, 1): 'But it displeased Jonah exceedingly, and he was angry.',
    (4, 2):
        'He prayed to Yahweh, and said, “Please, Yahweh, wasn’t this '
        'what I said when I was still in my own country? Therefore I '
        'hurried to flee to Tarshish, for I knew that you are a '
        'gracious God and merciful, slow to anger, and abundant in '
        'loving kindness, and you relent of doing harm.',
    (4, 3):
        'Therefore now, Yahweh, take, I beg you, my life from me, for'
        ' it is better for me to die than to live.”',
    (4, 4): 'Yahweh said, “Is it right for you to be angry?”',
    (4, 5):
        'Then Jonah went out of the city and sat on the east side of '
        'the city, and there made himself a booth and sat under it in'
        ' the shade, until he might see what would become of the '
        'city.',
    (4, 6):
        'Yahweh God prepared a vine and made it to come up over '
        'Jonah, that it might be a shade over his head to deliver him'
        ' from his discomfort. So Jonah was exceedingly glad because '
        'of the vine.',
    (4, 7):
        'But God prepared a worm at dawn the next day, and it chewed '
        'on the vine so that it withered.',
    (4, 8):
        'When the sun arose, God prepared a sultry east wind; and the'
        ' sun beat on Jonah’s head, so that he was faint and '
        'requested for himself that he might die. He said, “It is '
        'better for me to die than to live.”',
    (4, 9):
        'God said to Jonah, “Is it right for you to be angry about '
        'the vine?” He said, “I am right to be angry, even to death.”',
    (4, 10):
        'Yahweh said, “You have been concerned for the vine, for '
        'which you have not labored, neither made it grow; which came'
        ' up in a night and perished in a night.',
    (4, 11):
        'Shouldn’t I be concerned for Nineveh, that great city, in '
        'which are more than one hundred twenty thousand persons who '
        'can’t discern between their right hand and their left hand, '
        'and also many animals?”',
}
JONAH_ES = {
    (1, 1): 'Y FUÉ palabra de Jehová á Jonás, hijo de Amittai, diciendo:',
    (1, 2):
        'Levántate, y ve á Nínive, ciudad grande, y pregona contra '
        'ella; porque su maldad ha subido delante de mí.',
    (1, 3):
        'Y Jonás se levantó para huir de la presencia de Jehová á '
        'Tarsis, y descendió á Joppe; y halló un navío que partía '
        'para Tarsis; y pagando su pasaje entró en él, para irse con '
        'ellos á Tarsis de delante de Jehová.',
    (1, 4):
        'Mas Jehová hizo levantar un gran viento en la mar, é hízose '
        'una tan gran tempestad en la mar, que pensóse se rompería la'
        ' nave.',
    (1, 5):
        'Y los marineros tuvieron miedo, y cada uno llamaba á su '
        'dios: y echaron á la mar los enseres que había en la nave, '
        'para descargarla de ellos. Jonás empero se había bajado á '
        'los lados del buque, y se había echado á dormir.',
    (1, 6):
        'Y el maestre de la nave se llegó á él, y le dijo: ¿Qué '
        'tienes, dormilón? Levántate, y clama á tu Dios; quizá él '
        'tendrá compasión de nosotros, y no pereceremos.',
    (1, 7):
        'Y dijeron cada uno á su compañero: Venid, y echemos suertes,'
        ' para saber por quién nos ha venido este mal. Y echaron '
        'suertes, y la suerte cayó sobre Jonás.',
    (1, 8):
        'Entonces le dijeron ellos: Decláranos ahora por qué nos ha '
        'venido este mal. ¿Qué oficio tienes, y de dónde vienes? '
        '¿cuál es tu tierra, y de qué pueblo eres?',
    (1, 9):
        'Y él les respondió: Hebreo soy, y temo á Jehová, Dios de los'
        ' cielos, que hizo la mar y la tierra.',
    (1, 10):
        'Y aquellos hombres temieron sobremanera, y dijéronle: ¿Por '
        'qué has hecho esto? Porque ellos entendieron que huía de '
        'delante de Jehová, porque se lo había declarado.',
    (1, 11):
        'Y dijéronle: ¿Qué te haremos, para que la mar se nos quiete?'
        ' porque la mar iba á más, y se embravecía.',
    (1, 12):
        'El les respondió: Tomadme, y echadme á la mar, y la mar se '
        'os quietará: porque yo sé que por mí ha venido esta grande '
        'tempestad sobre vosotros.',
    (1, 13):
        'Y aquellos hombres trabajaron por tornar la nave á tierra; '
        'mas no pudieron, porque la mar iba á más, y se embravecía '
        'sobre ellos.',
    (1, 14):
        'Entonces clamaron á Jehová, y dijeron: Rogámoste ahora, '
        'Jehová, que no perezcamos nosotros por la vida de aqueste '
        'hombre, ni pongas sobre nosotros la sangre inocente: porque '
        'tú, Jehová, has hecho como has querido.',
    (1, 15):
        'Y tomaron á Jonás, y echáronlo á la mar; y la mar se quietó '
        'de su furia.',
    (1, 16):
        'Y temieron aquellos hombres á Jehová con gran temor; y '
        'ofrecieron sacrificio á Jehová, y prometieron votos.',
    (1, 17): '',
    (2, 1):
        'MAS Jehová había prevenido un gran pez que tragase á Jonás: '
        'y estuvo Jonás en el vientre del pez tres días y tres '
        'noches.',
    (2, 2): 'Y oró Jonás desde el vientre del pez á Jehová su Dios,',
    (2, 3):
        'Y dijo: Clamé de mi tribulación á Jehová, y él me oyó; del '
        'vientre del sepulcro clamé, y mi voz oiste.',
    (2, 4):
        'Echásteme en el profundo, en medio de los mares, y rodeóme '
        'la corriente; todas tus ondas y tus olas pasaron sobre mí.',
    (2, 5):
        'Y yo dije: Echado soy de delante de tus ojos: mas aun veré '
        'tu santo templo.',
    (2, 6):
        'Las aguas me rodearon hasta el alma, rodeóme el abismo; la '
        'ova se enredó á mi cabeza.',
    (2, 7):
        'Descendí á las raíces de los montes; la tierra echó sus '
        'cerraduras sobre mí para siempre: mas tú sacaste mi vida de '
        'la sepultura, oh Jehová Dios mío.',
    (2, 8):
        'Cuando mi alma desfallecía en mí, acordéme de Jehová; y mi '
        'oración entró hasta ti en tu santo templo.',
    (2, 9):
        'Los que guardan las vanidades ilusorias, su misericordia '
        'abandonan.',
    (2, 10):
        'Yo empero con voz de alabanza te sacrificaré; pagaré lo que '
        'prometí. La salvación pertenece á Jehová. Y mandó Jehová al '
        'pez, y vomitó á Jonás en tierra.',
    (3, 1): 'Y FUÉ palabra de Jehová segunda vez á Jonás, diciendo:',
    (3, 2):
        'Levántate, y ve á Nínive, aquella gran ciudad, y publica en '
        'ella el pregón que yo te diré.',
    (3, 3):
        'Y levantóse Jonás, y fué á Nínive, conforme á la palabra de '
        'Jehová. Y era Nínive ciudad sobremanera grande, de tres días'
        ' de camino.',
    (3, 4):
        'Y comenzó Jonás á entrar por la ciudad, camino de un día, y '
        'pregonaba diciendo: De aquí á cuarenta días Nínive será '
        'destruída.',
    (3, 5):
        'Y los hombres de Nínive creyeron á Dios, y pregonaron ayuno,'
        ' y vistiéronse de sacos desde el mayor de ellos hasta el '
        'menor de ellos.',
    (3, 6):
        'Y llegó el negocio hasta el rey de Nínive, y levantóse de su'
        ' silla, y echó de sí su vestido, y cubrióse de saco, y se '
        'sentó sobre ceniza.',
    (3, 7):
        'E hizo pregonar y anunciar en Nínive, por mandado del rey y '
        'de sus grandes, diciendo: Hombres y animales, bueyes y '
        'ovejas, no gusten cosa alguna, no se les dé alimento, ni '
        'beban agua:',
    (3, 8):
        'Y que se cubran de saco los hombres y los animales, y clamen'
        ' á Dios fuertemente: y conviértase cada uno de su mal '
        'camino, de la rapiña que está en sus manos.',
    (3, 9):
        '¿Quién sabe si se volverá y arrepentirá Dios, y se apartará '
        'del furor de su ira, y no pereceremos?',
    (3, 10):
        'Y vió Dios lo que hicieron, que se convirtieron de su mal '
        'camino: y arrepintióse del mal que había dicho les había de '
        'hacer, y no lo hizo.',
    (4, 1): 'PERO Jonás se apesadumbró en extremo, y enojóse.',
    (4, 2):
        'Y oró á Jehová, y dijo: Ahora, oh Jehová, ¿no es esto lo que'
        ' yo decía estando aún en mi tierra? Por eso me precaví '
        'huyendo á Tarsis: porque sabía yo que tú eres Dios clemente '
        'y piadoso, tardo á enojarte, y de grande misericordia, y que'
        ' te arrepientes del mal.',
    (4, 3):
        'Ahora pues, oh Jehová, ruégote que me mates; porque mejor me'
        ' es la muerte que la vida.',
    (4, 4): 'Y Jehová le dijo: ¿Haces tú bien en enojarte tanto?',
    (4, 5):
        'Y salióse Jonás de la ciudad, y asentó hacia el oriente de '
        'la ciudad, é hízose allí una choza, y se sentó debajo de '
        'ella á la sombra, hasta ver qué sería de la ciudad.',
    (4, 6):
        'Y preparó Jehová Dios una calabacera, la cual creció sobre '
        'Jonás para que hiciese sombra sobre su cabeza, y le '
        'defendiese de su mal: y Jonás se alegró grandemente por la '
        'calabacera.',
    (4, 7):
        'Mas Dios preparó un gusano al venir la mañana del día '
        'siguiente, el cual hirió á la calabacera, y secóse.',
    (4, 8):
        'Y acaeció que al salir el sol, preparó Dios un recio viento '
        'solano; y el sol hirió á Jonás en la cabeza, y desmayábase, '
        'y se deseaba la muerte, diciendo: Mejor sería para mí la '
        'muerte que mi vida.',
    (4, 9):
        'Entonces dijo Dios á Jonás: ¿Tanto te enojas por la '
        'calabacera? Y él respondió: Mucho me enojo, hasta la muerte.',
    (4, 10):
        'Y dijo Jehová: Tuviste tú lástima de la calabacera, en la '
        'cual no trabajaste, ni tú la hiciste crecer; que en espacio '
        'de una noche nació, y en espacio de otra noche pereció:',
    (4, 11):
        '¿Y no tendré yo piedad de Nínive, aquella grande ciudad '
        'donde hay más de ciento y veinte mil personas que no conocen'
        ' su mano derecha ni su mano izquierda, y muchos animales?',
}


def pairs_of(lengths_en, lengths_es, book="Book"):
    """Verse dicts {(book, 1, v): 'x' * length} for synthetic tests."""
    en = {(book, 1, v): "x" * n for v, n in enumerate(lengths_en, 1)}
    es = {(book, 1, v): "x" * n for v, n in enumerate(lengths_es, 1)}
    return en, es


class ParseImpTest(unittest.TestCase):
    def test_keys_headings_and_multiline_entries(self):
        text = ("$$$[ Module Heading ]\n\n$$$[ Testament 1 Heading ]\n"
                "<milestone/>\n$$$Genesis 0:0\nintro\n$$$Genesis 1:0\n"
                "<chapter/>\n$$$Genesis 1:1\nIn the beginning\n"
                "$$$Song of Solomon 1:2\nLet him\nkiss me\n")
        entries = bible.parse_imp(text)
        self.assertEqual(list(entries), [("Genesis", 1, 1),
                                         ("Song of Solomon", 1, 2)])
        self.assertEqual(entries[("Genesis", 1, 1)], "In the beginning")
        self.assertEqual(entries[("Song of Solomon", 1, 2)],
                         "Let him\nkiss me\n")


class StripMarkupTest(unittest.TestCase):
    def check(self, cases):
        for raw, expected in cases:
            with self.subTest(expected=expected[:40]):
                self.assertEqual(bible.strip_markup(raw), expected)

    def test_english_entries(self):
        self.check(EN_CASES)

    def test_spanish_entries(self):
        self.check(ES_CASES)

    def test_no_markup_left_in_real_entries(self):
        for raw, _ in EN_CASES + ES_CASES:
            text = bible.strip_markup(raw)
            for bad in "<>&\t\n" + bible.EDGE_MARK:
                self.assertNotIn(bad, text)

    def test_entities_nested_notes_and_whitespace(self):
        # Synthetic: the modules only have &amp; inside notes.
        raw = ('<w lemma="x">Tom</w> &amp; <w>Jerry</w>&#8217;s'
               '<note type="x"><reference>1:1</reference>a <note>b</note>'
               ' c</note> house\n\tis\u00a0big.<note>n</note>')
        self.assertEqual(bible.strip_markup(raw),
                         "Tom & Jerry’s house is big.")

    def test_note_spacing_rules(self):
        cases = [  # minimal hand-written cases
            ("God<note>x</note>created", "God created"),
            ("word<note>x</note>.", "word."),
            ("word <note>x</note> ?", "word?"),
            ("said,<note>x</note>“Go", "said, “Go"),
            ("(<note>x</note>see", "(see"),
            ("¿<note>x</note>Qué", "¿Qué"),
            # John 5:12 and Acts 20:35 (WEB), markup left out.
            ("‘Take up your mat and walk’ ?”",
             "‘Take up your mat and walk’?”"),
            ("than to receive.’ ”", "than to receive.’”"),
            ("the ‘ ’Tis", "the ‘ ’Tis"),
        ]
        for raw, expected in cases:
            self.assertEqual(bible.strip_markup(raw), expected)

    def test_inline_boundaries(self):
        cases = [  # minimal hand-written cases
            ('<w>God</w><w>created</w>', "God created"),
            ('<w>God</w>’s', "God’s"),
            ('<w>it</w>.”</q><w>So</w>', "it.” So"),
            ('“<w>It</w>', "“It"),
            ('<hi type="italic">un</hi>believing', "unbelieving"),
            ('<divineName>Lord</divineName>’s', "Lord’s"),
        ]
        for raw, expected in cases:
            self.assertEqual(bible.strip_markup(raw), expected)

    def test_titles_milestones_and_empty_verses(self):
        raw = ('<title type="x-section">Heading</title><lb type="x-p"/>'
               '<l level="1" sID="a"/>Text<l eID="a" level="1"/>')
        self.assertEqual(bible.strip_markup(raw), "Text")
        self.assertEqual(bible.strip_markup('<div sID="a" type="x-p"/>'), "")
        self.assertTrue(bible.is_empty(bible.strip_markup("—")))
        self.assertFalse(bible.is_empty("Amén."))


class EncliticTest(unittest.TestCase):
    def test_decisions(self):
        cases = [  # (text before the clitic, right glued, enclitic?)
            ("Y aparecióse ... y díjo", True, True),     # díjole Dios
            ("consultó al pythón, preguntándo", False, True),
            ("Esta es la causa por la cual Josué", False, False),
            ("Y cuánto", True, False),                    # cuánto nos ayudó
            ("No para condenar", True, True),             # condenaros lo
            ("y las gentes", True, False),                # gentes lo oyeron
            ("Dígan", True, True),                        # Díganlo los
            ("el ángel de Jehová", True, False),          # Jehová los acose
            ("Y no", True, False),                        # no lo hizo
        ]
        for before, right_glued, expected in cases:
            with self.subTest(before=before):
                self.assertEqual(bible.attaches_enclitic(before, right_glued),
                                 expected)


class ColophonTest(unittest.TestCase):
    ROMANS_16_27 = ("Al solo Dios sabio, sea gloria por Jesucristo para "
                    "siempre. Amén. Fué escrita de Corinto á los Romanos, "
                    "enviada por medio de Febe, diaconisa de la iglesia de "
                    "Cencreas.")

    def test_cut_from_last_verse_only(self):
        texts = {("Romans", 16, 26): "Amén. Escrita de Roma.",
                 ("Romans", 16, 27): self.ROMANS_16_27,
                 ("Romans", 16, 28): "",
                 ("Philippians", 4, 23): "La gracia de nuestro Señor "
                 "Jesucristo sea con todos vosotros. Amén. Escrita de Roma "
                 "con Epafrodito."}
        changed = bible.cut_colophons(texts)
        self.assertEqual(changed, [("Romans", 16, 27), ("Philippians", 4, 23)])
        self.assertEqual(texts[("Romans", 16, 27)], "Al solo Dios sabio, sea "
                         "gloria por Jesucristo para siempre. Amén.")
        self.assertEqual(texts[("Romans", 16, 26)], "Amén. Escrita de Roma.")
        self.assertTrue(
            texts[("Philippians", 4, 23)].endswith("vosotros. Amén."))

    def test_plain_amen_untouched(self):
        text = "La gracia sea con vosotros. Amén."
        self.assertEqual(bible.cut_colophon(text), text)


class DropCapTest(unittest.TestCase):
    # Other verses, as they occur in the RV: they give the usual spellings.
    CONTEXT = {
        ("Genesis", 1, 3): "Y dijo Dios: Sea la luz: y fué la luz.",
        ("Genesis", 6, 13): "Y dijo Dios á Noé: El fin de toda carne ha "
                            "venido delante de mí.",
        ("Genesis", 7, 5): "E hizo Noé conforme á todo lo que le mandó "
                           "Jehová.",
        ("I Kings", 16, 30): "Y Achâb hijo de Omri hizo lo malo.",
        ("Joshua", 18, 11): "Y sacóse la suerte de la tribu de los hijos "
                            "de Benjamín; la segunda vez.",
        ("Psalms", 119, 2): "Bienaventurados los que guardan sus "
                            "testimonios. En el principio.",
    }

    def respell(self, key, text):
        texts = dict(self.CONTEXT)
        texts[key] = text
        changed = bible.lower_drop_caps(texts)
        self.assertEqual(changed, [key])
        return texts[key]

    def test_real_chapter_starts(self):
        cases = [
            (("Genesis", 1, 1), "EN el principio crió Dios los cielos",
             "En el principio crió Dios los cielos"),
            (("Genesis", 7, 1), "Y JEHOVÁ dijo á Noé: Entra tú",
             "Y Jehová dijo á Noé: Entra tú"),
            (("Joshua", 19, 1), "LA SEGUNDA suerte salió por Simeón",
             "La segunda suerte salió por Simeón"),
            (("Psalms", 8, 1), "Al Músico principal: sobre Gittith: Salmo "
             "de David. OH Jehová, Señor nuestro,", "Al Músico principal: "
             "sobre Gittith: Salmo de David. Oh Jehová, Señor nuestro,"),
            (("Psalms", 119, 1), "ALEPH. BIENAVENTURADOS los perfectos",
             "ALEPH. Bienaventurados los perfectos"),
            (("I Kings", 19, 1), "Y ACHAB dió la nueva á Jezabel",
             "Y Achâb dió la nueva á Jezabel"),
            (("Job", 27, 1), "Y REASUMIÓ Job su discurso, y dijo:",
             "Y reasumió Job su discurso, y dijo:"),
            (("Psalms", 147, 1), "ALABAD á JAH, porque es bueno",
             "Alabad á JAH, porque es bueno"),
        ]
        for key, raw, expected in cases:
            with self.subTest(raw=raw):
                self.assertEqual(self.respell(key, raw), expected)

    def test_only_first_verses_change(self):
        texts = {("Matthew", 27, 37): "ESTE ES JESUS EL REY DE LOS JUDIOS.",
                 ("Matthew", 27, 1): "Y VENIDA la mañana"}
        self.assertEqual(bible.lower_drop_caps(texts), [("Matthew", 27, 1)])
        self.assertEqual(texts[("Matthew", 27, 37)],
                         "ESTE ES JESUS EL REY DE LOS JUDIOS.")


class LengthModelTest(unittest.TestCase):
    def test_fit_and_delta(self):
        rng = random.Random(1)
        pairs = []
        for _ in range(2000):
            n = rng.randint(20, 300)
            noise = rng.gauss(0, 1.3 * n ** 0.5)
            pairs.append((n, max(1, round(0.95 * n + noise))))
        model = bible.LengthModel.fit(pairs)
        self.assertAlmostEqual(model.c, 0.95, delta=0.02)
        self.assertAlmostEqual(model.s2, 1.3 ** 2, delta=0.4)
        self.assertLess(abs(model.delta(100, 95)), 0.5)
        self.assertGreater(abs(model.delta(100, 30)), 5)
        self.assertLessEqual(model.cost(100, 1), bible.LENGTH_COST_CAP)


class GaleChurchTest(unittest.TestCase):
    def setUp(self):
        rng = random.Random(7)
        self.lengths = [rng.randint(30, 250) for _ in range(60)]
        self.model = bible.LengthModel(1.0, 1.5)

    def seq(self, lengths):
        return [((1, v), n) for v, n in enumerate(lengths, 1)]

    def test_identical_numbering_links_everything(self):
        links = bible.gale_church(self.model, self.seq(self.lengths),
                                  self.seq(self.lengths))
        self.assertEqual(links, {((1, v), (1, v)) for v in range(1, 61)})

    def test_shifted_run_is_followed(self):
        # Spanish verses 20-39 carry the text of English 19-38 (numbering
        # shifted by one), English 39-40 have no Spanish counterpart, and
        # Spanish 40-59 are English 41-60 again shifted back by one.
        es = self.lengths[:19] + self.lengths[18:38] + self.lengths[40:]
        links = bible.gale_church(self.model, self.seq(self.lengths),
                                  self.seq(es))
        same = {a[1] for a, b in links if a == b}
        self.assertEqual(same, set(range(1, 20)))
        shifted = {(a[1], b[1]) for a, b in links if a != b}
        self.assertTrue({(v, v + 1) for v in range(20, 39)} <= shifted)
        self.assertTrue({(v, v - 1) for v in range(41, 61)} <= shifted)


class AlignTest(unittest.TestCase):
    def jonah(self):
        en = {("Jonah",) + k: v for k, v in JONAH_EN.items()}
        es = {("Jonah",) + k: v for k, v in JONAH_ES.items()}
        return en, es

    def test_jonah_shifted_chapter_dropped(self):
        pairs, dropped, _ = bible.align(*self.jonah())
        kept = {key for key, _, _ in pairs}
        self.assertEqual(dropped["empty in Spanish"], [("Jonah", 1, 17)])
        self.assertEqual(dropped["numbering shift"],
                         [("Jonah", 2, v) for v in range(1, 11)])
        self.assertEqual(len(pairs), 48 - 11)
        self.assertIn(("Jonah", 1, 16), kept)
        self.assertIn(("Jonah", 3, 1), kept)
        self.assertEqual(pairs[0], (("Jonah", 1, 1), JONAH_EN[(1, 1)],
                                    JONAH_ES[(1, 1)]))

    def test_unpaired_reasons(self):
        en, es = self.jonah()
        en[("Tobit", 1, 1)] = "This is the book of the words of Tobit"
        en[("Jonah", 4, 12)] = "A verse numbered only in English."
        es[("Jonah", 3, 3)] = "—"
        en[("Jonah", 3, 4)] = ""
        pairs, dropped, _ = bible.align(en, es)
        self.assertEqual(dropped["book only in English"], [("Tobit", 1, 1)])
        self.assertEqual(dropped["verse only in English"], [("Jonah", 4, 12)])
        self.assertIn(("Jonah", 3, 3), dropped["empty in Spanish"])
        self.assertEqual(dropped["empty in English"], [("Jonah", 3, 4)])
        self.assertEqual(len(pairs), 48 - 11 - 2)

    def test_length_outlier_dropped(self):
        en, es = self.jonah()
        # Matthew 27:35: the RV (like the KJV) adds a whole quotation.
        en[("Jonah", 3, 6)] = ("When they had crucified him, they divided "
                               "his clothing among them, casting lots,")
        es[("Jonah", 3, 6)] = (
            "Y después que le hubieron crucificado, repartieron sus "
            "vestidos, echando suertes: para que se cumpliese lo que fué "
            "dicho por el profeta: Se repartieron mis vestidos, y sobre mi "
            "ropa echaron suertes.")
        _, dropped, _ = bible.align(en, es)
        self.assertEqual(dropped["length ratio outlier"], [("Jonah", 3, 6)])

    def test_synthetic_boundary_shift_dropped(self):
        rng = random.Random(3)
        lengths = [rng.randint(60, 200) for _ in range(40)]
        es_lengths = list(lengths)
        es_lengths[10] -= 50            # a clause moves from verse 11 ...
        es_lengths[11] += 50            # ... to verse 12 in Spanish
        en, es = pairs_of(lengths, es_lengths)
        pairs, dropped, _ = bible.align(en, es)
        self.assertEqual(dropped["numbering shift"],
                         [("Book", 1, 11), ("Book", 1, 12)])
        self.assertEqual(len(pairs), 38)


class SplitTest(unittest.TestCase):
    def test_whole_books_held_out(self):
        pairs = [((book, 1, v), "e", "s")
                 for book in ("Genesis", "Judges", "Ruth", "Romans", "John")
                 for v in (1, 2)]
        splits = bible.split_by_book(pairs)
        self.assertEqual({p[0][0] for p in splits["train"]}, {"Genesis"})
        self.assertEqual({p[0][0] for p in splits["valid"]},
                         {"Judges", "Romans"})
        self.assertEqual({p[0][0] for p in splits["test"]}, {"Ruth", "John"})
        self.assertEqual(sum(len(s) for s in splits.values()), len(pairs))

    def test_held_out_sets_are_disjoint(self):
        self.assertFalse(set(bible.VALID_BOOKS) & set(bible.TEST_BOOKS))
        with self.assertRaises(ValueError):
            bible.split_by_book([], valid_books=("Ruth",),
                                test_books=("Ruth",))


class WriteOutputsTest(unittest.TestCase):
    def test_files_complete_and_idempotent(self):
        splits = {"train": [(("Genesis", 1, 1), "In the\tbeginning",
                             "EN el principio")],
                  "valid": [(("Judges", 1, 1), "a", "b")],
                  "test": [(("Ruth", 1, 1), "c", "d\n")]}
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bible")
            for _ in range(2):
                bible.write_outputs(out, splits, "report\n")
                self.assertEqual(sorted(os.listdir(out)), sorted(
                    [f"{s}.{l}" for s in bible.SPLITS for l in ("en", "es")]
                    + ["report.txt"]))
            with open(os.path.join(out, "train.en"), encoding="utf-8") as f:
                self.assertEqual(f.read(), "In the beginning\n")
            with open(os.path.join(out, "test.es"), "rb") as f:
                self.assertEqual(f.read(), b"d\n")

    def test_failed_run_leaves_no_complete_looking_set(self):
        good = {"train": [(("Genesis", 1, 1), "a", "b")], "valid": [],
                "test": []}
        bad = {"train": [(("Genesis", 1, 1), "a", "")], "valid": [],
               "test": []}
        with tempfile.TemporaryDirectory() as out:
            bible.write_outputs(out, good, "report\n")
            os.mkdir(os.path.join(out, bible.TMP_PREFIX + "stale"))
            with self.assertRaises(ValueError):
                bible.write_outputs(out, bad, "report\n")
            names = os.listdir(out)
            self.assertNotIn("report.txt", names)
            self.assertFalse([n for n in names if n.startswith(".")])

    def test_empty_sentence_rejected(self):
        with self.assertRaises(ValueError):
            bible.clean_line(" \t ")


class CommandLineTest(unittest.TestCase):
    def test_help(self):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), \
                self.assertRaises(SystemExit) as exit:
            bible.main(["--help"])
        self.assertEqual(exit.exception.code, 0)
        self.assertIn("--out", stdout.getvalue())

    def with_path(self, path):
        old = os.environ["PATH"]
        os.environ["PATH"] = path
        self.addCleanup(os.environ.__setitem__, "PATH", old)

    def test_missing_mod2imp_names_package(self):
        with tempfile.TemporaryDirectory() as empty:
            self.with_path(empty)
            with self.assertRaises(bible.BibleError) as err:
                bible.run_mod2imp("engWEB2015eb", "sword-text-web")
        self.assertIn("libsword-utils", str(err.exception))

    def test_missing_module_names_package(self):
        with tempfile.TemporaryDirectory() as bindir:
            fake = os.path.join(bindir, "mod2imp")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho \"mod2imp: Couldn't find module: $1\""
                        " >&2\nexit 255\n")
            os.chmod(fake, 0o755)
            self.with_path(bindir)
            with self.assertRaises(bible.BibleError) as err:
                bible.run_mod2imp("spaRV1909eb", "sword-text-sparv")
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), \
                    contextlib.redirect_stdout(io.StringIO()):
                out = os.path.join(bindir, "out")
                self.assertEqual(bible.main(["--out", out]), 1)
        message = str(err.exception)
        self.assertIn("spaRV1909eb", message)
        self.assertIn("sword-text-sparv", message)
        self.assertIn("sword-text-web", stderr.getvalue())


class EndToEndTest(unittest.TestCase):
    """The whole script against a fake mod2imp that serves Jonah."""

    def test_main_writes_corpus(self):
        with tempfile.TemporaryDirectory() as tmp:
            modules = {"engWEB2015eb": JONAH_EN, "spaRV1909eb": JONAH_ES}
            for module, verses in modules.items():
                with open(os.path.join(tmp, module + ".imp"), "w",
                          encoding="utf-8") as f:
                    f.write("$$$[ Module Heading ]\n\n$$$Jonah 1:0\n"
                            '<chapter n="1" osisID="Jonah.1" sID="Jonah.1"/>\n')
                    for (chapter, verse), text in verses.items():
                        words = "".join(f'<w lemma="strong:H0001">{w}</w> '
                                        for w in text.split())
                        f.write(f"$$$Jonah {chapter}:{verse}\n{words}\n")
            fake = os.path.join(tmp, "mod2imp")
            with open(fake, "w") as f:
                f.write(f'#!/bin/sh\nexec cat "{tmp}/$1.imp"\n')
            os.chmod(fake, 0o755)
            old_path = os.environ["PATH"]
            os.environ["PATH"] = tmp + os.pathsep + old_path
            self.addCleanup(os.environ.__setitem__, "PATH", old_path)

            out = os.path.join(tmp, "out")
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                self.assertEqual(bible.main(["--out", out]), 0)
            self.assertIn("aligned 37 pairs", stdout.getvalue())
            with open(os.path.join(out, "test.en"), encoding="utf-8") as f:
                test_en = f.read().split("\n")
            with open(os.path.join(out, "test.es"), encoding="utf-8") as f:
                test_es = f.read().split("\n")
            self.assertEqual(len(test_en), 38)      # 37 lines + final ""
            self.assertEqual(len(test_es), 38)
            self.assertEqual(test_en[0], JONAH_EN[(1, 1)])
            # Jonah 1:1, with the drop capital respelled ("Y FUÉ palabra").
            self.assertEqual(test_es[0], "Y fué palabra de Jehová á Jonás, "
                             "hijo de Amittai, diciendo:")
            with open(os.path.join(out, "report.txt"), encoding="utf-8") as f:
                report = f.read()
            self.assertIn("numbering shift: 10  [Jonah 2 (10)]", report)
            self.assertIn("test: 37  (Jonah)", report)
            self.assertEqual(os.path.getsize(os.path.join(out, "train.en")), 0)


def main():
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    print(f"bible_test: {result.testsRun} tests, {len(result.failures)} "
          f"failures, {len(result.errors)} errors")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
