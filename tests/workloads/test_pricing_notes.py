"""A trace's per-role note says each caveat once: ``asicsim trace digits_mlp --recipe fp8_hybrid
--design gpu_b200`` printed B200's "no Blackwell-generation measurements: ..." twice for
grad-input, whose ops carried it alone and together with the alignment caveat."""

from asicsim._src.workloads.pricing import merged_notes


def test_a_note_held_by_another_is_not_repeated():
    a, b = "no Blackwell-generation measurements: x of Hopper", "dimensions not multiples of 16"
    assert merged_notes([a, f"{a}; {b}", a, "", None]) == f"{a}; {b}"
    assert merged_notes([a, b]) == f"{a}; {b}"
    assert merged_notes([]) == ""
