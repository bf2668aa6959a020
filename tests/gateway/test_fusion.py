from gateway.fusion import Lane, fuse


def test_an_item_found_by_two_lanes_outranks_items_found_by_one():
    fused = fuse([Lane(["a", "b", "c"]), Lane(["c", "d"])])

    assert [key for key, _ in fused][:1] == ["c"]
    assert {key for key, _ in fused} == {"a", "b", "c", "d"}


def test_weights_scale_a_lanes_say_and_ties_keep_first_seen_order():
    fused = fuse([Lane(["x"], weight=0.5), Lane(["y"]), Lane(["z"])])

    assert [key for key, _ in fused] == ["y", "z", "x"]


def test_repeats_within_a_lane_count_once_at_their_best_rank():
    once = dict(fuse([Lane(["a", "b"])]))
    repeated = dict(fuse([Lane(["a", "b", "a", "a"])]))

    assert once == repeated
