"""The text a family keeps (``Family.text``, set by the encoder): the same family is its text in any
cache, an equal but new family is rendered anew (and gets its own), and a family another cache
rendered comes out the same in a fresh one (sinks/encoding/prom_text.py ``SeriesText.texts``)."""

from __future__ import annotations

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.sinks.encoding import prom_text

GPU0 = (("gpu", "0"),)


def test_a_family_keeps_its_text_and_a_new_one_is_rendered() -> None:
    family = Family("x", "gauge", "X.", (Series(GPU0, 1.0),))
    assert family.text is None, "not rendered yet"
    first = prom_text.encode(PromBatch(0, (family,)), prom_text.SeriesText())
    assert first == '# HELP x X.\n# TYPE x gauge\nx{gpu="0"} 1\n'
    assert family.text == first[:-1], "kept with the family"
    assert prom_text.encode(PromBatch(0, (family,)), prom_text.SeriesText()) == first, "another cache"
    moved = Family("x", "gauge", "X.", (Series(GPU0, 2.5),))
    assert moved == Family("x", "gauge", "X.", (Series(GPU0, 2.5),)) and moved.text is None
    assert prom_text.encode(PromBatch(0, (moved,))) == '# HELP x X.\n# TYPE x gauge\nx{gpu="0"} 2.5\n'
    assert moved.text is not None and family.text == first[:-1], "each family its own text"
    assert moved._replace(help="Y.").text is None, "a copy is a new family: no text"
