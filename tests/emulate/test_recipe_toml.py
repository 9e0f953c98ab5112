"""A recipe written back as TOML (what the report shows for a sweep's recipes) reads back, through
the real loader, as the same Policy: every shipped recipe; and a Policy's repr (what spec.json
records) is read with no evaluation beyond Policy, RoleSpec and LossScaling over literals."""

from __future__ import annotations

import tomllib

import pytest

from asicsim._src.emulate.policy import list_recipes
from asicsim._src.emulate.recipe_toml import policy_from_repr, recipe_toml
from asicsim._src.emulate.recipes import load_recipe, policy_from_table


@pytest.mark.parametrize("name", list_recipes())
def test_every_shipped_recipe_round_trips(name):
    p = load_recipe(name)
    text = recipe_toml(p)
    assert policy_from_table(tomllib.loads(text)) == p
    assert policy_from_repr(repr(p)) == p
    assert "RoleSpec(" not in text and max(map(len, text.splitlines())) < 2000


def test_defaults_are_left_out():
    text = recipe_toml(load_recipe("fp16_mixed"))
    assert '\n[roles]\nweight = "fp16"' in text or 'weight = "fp16"' in text
    assert "[loss_scaling]" in text and 'kind = "dynamic"' in text and "growth_interval" not in text


@pytest.mark.parametrize(("text", "message"), [
    ("__import__('os').system('true')", "not a recipe's repr"),
    ("Policy(name=open('x'))", "not a recipe's repr"),
    ("RoleSpec(format='bf16')", "no Policy"),
    ("Policy(", "not a recipe's repr"),
])
def test_a_repr_is_read_not_evaluated(text, message):
    with pytest.raises(ValueError, match=message):
        policy_from_repr(text)
