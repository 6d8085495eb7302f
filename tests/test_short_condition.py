"""A condition said in a table cell is cut at a word boundary, never inside a token, with brackets closed."""

from fusion_analyze.render.markdown import short_condition


def test_a_short_condition_is_kept_whole():
    assert short_condition("self.tp_size > 1") == "self.tp_size > 1"


def test_a_long_condition_is_cut_between_top_level_words():
    text = "not (dual_chunk_attention_config is not None) and model_config.use_mla and has_decode and more_tests"
    out = short_condition(text, width=60)
    assert out.endswith(" …") and text.startswith(out[:-2]) and out.count("(") == out.count(")")


def test_one_long_bracketed_test_is_cut_inside_with_its_brackets_closed():
    text = "( use_moe and ((layer_idx + 1) % moe_layer_interval == 0) and layer_idx >= moe_layer_start_index )"
    out = short_condition(text, width=60)
    assert " …" in out and out.count("(") == out.count(")")
    assert text.startswith(out.split(" …")[0])
