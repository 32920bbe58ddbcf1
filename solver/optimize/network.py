"""Switches counted from ports: one switch, or a non-blocking two-tier leaf/spine.

A network with ``P`` ports to serve and switches of ``R`` ports needs
    P = 0        nothing;
    P <= R       one switch, no spine;
    P > R        leaves L = ceil(P / H) with H = floor(R / 2) ports down and H up each,
                 spines S = ceil(H L / R) (at least one), and H L leaf-to-spine links.
Above R·H ports a real network would add a third tier; the two-tier count is kept as the
price (stated in the docstring of :mod:`solver.optimize.mip`).

:func:`switch_counts` is the bill's own statement of that rule;
:func:`add_switch_network` states it inside the MIP with integer variables (leaves ``L``,
spines ``S``, uplinks ``U``, two-tier indicator ``y``) so that at any optimum the variables
equal :func:`switch_counts` of the ports bought:
    R L >= P;   P <= R + M y;   H L >= P - M'(1 - y);
    R S >= H L - H Lmax (1 - y);   S >= y;   U >= H L - H Lmax (1 - y)
with M = Pmax - R, M' = Pmax, Lmax = ceil(Pmax / H) and Pmax an upper bound on P.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver.optimize.linear import LinearModel


@dataclass(frozen=True)
class SwitchCounts:
    """Switches and inter-switch links of one network."""

    leaves: int
    spines: int
    uplinks: int

    @property
    def switches(self) -> int:
        return self.leaves + self.spines


def switch_counts(ports: int, radix: int) -> SwitchCounts:
    """Switches of ``radix`` ports for ``ports`` node-facing ports (module docstring)."""
    if ports <= 0:
        return SwitchCounts(0, 0, 0)
    if ports <= radix:
        return SwitchCounts(1, 0, 0)
    half = radix // 2
    leaves = math.ceil(ports / half)
    spines = max(1, math.ceil(half * leaves / radix))
    return SwitchCounts(leaves, spines, half * leaves)


def leaf_var(tag: str) -> str:
    return f"sw_leaf[{tag}]"


def spine_var(tag: str) -> str:
    return f"sw_spine[{tag}]"


def uplink_var(tag: str) -> str:
    return f"sw_uplink[{tag}]"


def tier_var(tag: str) -> str:
    return f"sw_two_tier[{tag}]"


def network_vars(tag: str, max_ports: float, radix: int) -> list[str]:
    """The variables :func:`add_switch_network` creates for this network."""
    if max_ports <= 0:
        return []
    if max_ports <= radix:
        return [leaf_var(tag)]
    return [leaf_var(tag), spine_var(tag), uplink_var(tag), tier_var(tag)]


def add_switch_network(model: LinearModel, tag: str, ports: dict[str, float],
                       max_ports: float, radix: int) -> None:
    """Switch variables and constraints for a network whose node-facing ports are
    ``Σ ports[var] · var`` (at most ``max_ports``); costs are added by the caller."""
    if max_ports <= 0 or not ports:
        return
    leaves = model.var(leaf_var(tag), 0, max(1, math.ceil(max_ports / max(radix // 2, 1))))
    model.add(f"switch_ports[{tag}]", {**ports, leaves: -float(radix)}, "<=", 0.0)
    if max_ports <= radix:
        return
    half = radix // 2
    lmax = math.ceil(max_ports / half)
    spines = model.var(spine_var(tag), 0, max(1, math.ceil(half * lmax / radix)))
    uplinks = model.var(uplink_var(tag), 0, half * lmax)
    two = model.var(tier_var(tag), 0, 1)
    big = float(max_ports)
    model.add(f"two_tier_needed[{tag}]", {**ports, two: -(big - radix)}, "<=", float(radix))
    model.add(f"leaf_ports[{tag}]", {**ports, leaves: -float(half), two: big}, "<=", big)
    model.add(f"spines[{tag}]", {spines: float(radix), leaves: -float(half),
                                 two: -float(half * lmax)}, ">=", -float(half * lmax))
    model.add(f"spine_present[{tag}]", {spines: 1.0, two: -1.0}, ">=", 0.0)
    model.add(f"uplinks[{tag}]", {uplinks: 1.0, leaves: -float(half),
                                  two: -float(half * lmax)}, ">=", -float(half * lmax))
