"""Known answers for the model geometry that two surviving mutants of issue 30's sample
showed untested: the largest weight matrix of a layer (it sizes the matmul workspace) and a
MoE model's expert parameters when the catalog has no config for it."""

from __future__ import annotations

import pytest

from solver.catalog.load import load_catalog
from solver.physics.geometry import geometry
from solver.physics.memory import largest_matrix_params

CATALOG = load_catalog()


@pytest.mark.parametrize("model, expected, what", [
    ("llama-3.1-8b", 4096 * 14336, "MLP projection hidden x intermediate"),
    ("llama-3.1-70b", 8192 * 28672, "MLP projection hidden x intermediate"),
    ("mixtral-8x7b", 4096 * 14336, "one expert's projection"),
    ("qwen3-30b-a3b", 2048 * 32 * 128, "the query projection (experts are 2048 x 768)"),
])
def test_largest_matrix_of_a_layer(model, expected, what):
    """From the models' config.json: Llama-3.1-8B hidden 4096, intermediate 14336; 70B
    8192/28672; Mixtral-8x7B experts of 4096 x 14336; Qwen3-30B-A3B hidden 2048, 32 heads of
    128, experts of 768."""
    got = largest_matrix_params(geometry(CATALOG.models[model]))
    assert got == pytest.approx(expected, rel=0.01), what


def test_moe_expert_params_without_a_config():
    """A MoE model known only by its parameter counts: the experts hold
    (total - active) / (1 - k / E) parameters (only k of E are active per token)."""
    mixtral = CATALOG.models["mixtral-8x7b"]
    bare = mixtral.model_copy(update={"architecture": None})
    geo = geometry(bare)
    k, e = mixtral.experts_per_token, mixtral.experts
    expected = (mixtral.params_b - mixtral.active_params_b) * 1e9 / (1 - k / e)
    assert geo.expert_params == pytest.approx(expected, rel=1e-9)
    assert 0 < geo.expert_params < mixtral.params_b * 1e9
