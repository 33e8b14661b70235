import numpy as np
import pandas as pd
import pytest

from causaltrace import Dimension, Panel, PanelError, Slice, SliceError, TimeAxis, parse_slice
from causaltrace.model.slices import enumerate_slices


def test_cross_product_shape_and_order(small_panel):
    assert small_panel.shape == (6, 20)
    assert small_panel.size == 120
    # C order: the last dimension varies fastest.
    assert list(small_panel.labels("geo")[:2]) == ["us", "eu"]
    assert list(small_panel.labels("device")[:3]) == ["mobile", "mobile", "desktop"]


def test_time_axis_hourly():
    axis = TimeAxis("2026-03-01T00", 48, "h")
    assert axis.values[0] == np.datetime64("2026-03-01T00", "h")
    assert axis.values[-1] == np.datetime64("2026-03-02T23", "h")


def test_where_keeps_nested_cells():
    panel = Panel.cross(
        [
            Dimension("device", ("mobile", "desktop")),
            Dimension("browser", ("ios", "chrome", "mac")),
        ],
        TimeAxis("2026-01-01", 3),
    )
    nested = panel.where(lambda lv: ~((lv["device"] == "mobile") & (lv["browser"] == "mac")))
    assert nested.n_cells == 5
    assert ("mobile", "mac") not in set(zip(nested.labels("device"), nested.labels("browser")))


def test_group_sum_matches_pandas(small_panel, rng):
    values = rng.random(small_panel.shape)
    got = small_panel.group_sum(values, ["device"])
    frame = pd.DataFrame(values).assign(device=small_panel.codes("device"))
    expected = frame.groupby("device").sum().to_numpy()
    np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(
        small_panel.group_mean(values, ["device"]), frame.groupby("device").mean().to_numpy()
    )
    share = small_panel.group_share(values, ["device"])
    np.testing.assert_allclose(small_panel.group_sum(share, ["device"]), 1.0)


def test_dimension_rejects_bad_names():
    with pytest.raises(PanelError, match="twice"):
        Dimension("device", ("mobile", "mobile"))
    with pytest.raises(PanelError, match="forbidden"):
        Dimension("dev&ice", ("a",))


def test_parse_slice_canonical_form(small_panel):
    sl = parse_slice(" geo=eu & device=mobile ", small_panel)
    assert sl.canonical() == "device=mobile&geo=eu"
    assert parse_slice("device=mobile&geo=eu") == sl
    assert sl.order == 2
    assert parse_slice(None).is_whole_panel and parse_slice("*").is_whole_panel
    assert parse_slice({"geo": "us"}).canonical() == "geo=us"


def test_slice_mask(small_panel):
    mask = parse_slice("device=desktop&geo=eu", small_panel).mask(small_panel)
    assert mask.sum() == 1
    assert small_panel.labels("device")[mask][0] == "desktop"
    assert parse_slice("").mask(small_panel).all()


@pytest.mark.parametrize(
    ("text", "culprit"),
    [
        ("country=us", "unknown dimension 'country'"),
        ("device=phone", "unknown level 'phone' of dimension 'device'"),
        ("device", "not of the form dim=level"),
        ("device=mobile&device=tablet", "more than once"),
        ("device=", "empty name"),
    ],
)
def test_parse_slice_rejects_by_name(small_panel, text, culprit):
    with pytest.raises(SliceError, match=culprit):
        parse_slice(text, small_panel)


def test_slice_relations():
    fine = Slice.of(device="mobile", geo="us")
    coarse = Slice.of(device="mobile")
    assert coarse.contains(fine) and not fine.contains(coarse)
    assert set(fine.parents()) == {Slice.of(device="mobile"), Slice.of(geo="us")}


def test_enumerate_slices_skips_empty_combinations():
    panel = Panel.cross(
        [Dimension("a", ("x", "y")), Dimension("b", ("p", "q"))], TimeAxis("2026-01-01", 2)
    ).where(lambda lv: ~((lv["a"] == "x") & (lv["b"] == "q")))
    found = {s.canonical() for s in enumerate_slices(panel, ("a", "b"))}
    assert found == {"a=x&b=p", "a=y&b=p", "a=y&b=q"}
