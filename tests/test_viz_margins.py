"""The left margin a chart asks for holds its longest category tick label (viz/margins.py)."""

from sim_core.viz.margins import label_margin


def test_the_margin_grows_with_the_longest_label_and_never_drops_below_the_floor():
    # "#123 s4 t2" is 10 characters: 24 px of standoff and slack + 10 x 6 px = 84 px
    assert label_margin(["#7", "#123 s4 t2", "#45"]) == 84
    # "#59" would need 24 + 18 = 42 px; "#5" only 36, so the 40 px floor holds
    assert label_margin(["#59"]) == 42
    assert label_margin(["#5"]) == 40
    assert label_margin([], least=12) == 24        # no labels: the standoff alone
