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

A network may have ``A`` free ports elsewhere (the front-end: the site's own LAN,
``facility.lan_ports``): while P <= A no switch is bought; above A the network brings its
own switches for all P ports. :func:`switches_needed` is the bill's rule; in the MIP a
binary ``o`` ("own switches") gates the rows above: P <= A + Pmax o, and every P there is
read as P - Pmax (1 - o), so with o = 0 they hold at L = S = U = y = 0.
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


def switches_needed(ports: int, radix: int, free_ports: int = 0) -> SwitchCounts:
    """Switches bought for ``ports`` node-facing ports when ``free_ports`` of them can join
    a network that is already there (module docstring): none while they fit, else all."""
    return switch_counts(0 if ports <= free_ports else ports, radix)


def own_var(tag: str) -> str:
    return f"sw_own[{tag}]"


def leaf_var(tag: str) -> str:
    return f"sw_leaf[{tag}]"


def spine_var(tag: str) -> str:
    return f"sw_spine[{tag}]"


def uplink_var(tag: str) -> str:
    return f"sw_uplink[{tag}]"


def tier_var(tag: str) -> str:
    return f"sw_two_tier[{tag}]"


def network_vars(tag: str, max_ports: float, radix: int, free_ports: int = 0) -> list[str]:
    """The variables :func:`add_switch_network` creates for this network."""
    if max_ports <= 0 or max_ports <= free_ports:
        return []
    own = [own_var(tag)] if free_ports > 0 else []
    if max_ports <= radix:
        return [*own, leaf_var(tag)]
    return [*own, leaf_var(tag), spine_var(tag), uplink_var(tag), tier_var(tag)]


def add_switch_network(model: LinearModel, tag: str, ports: dict[str, float],
                       max_ports: float, radix: int, free_ports: int = 0) -> None:
    """Switch variables and constraints for a network whose node-facing ports are
    ``Σ ports[var] · var`` (at most ``max_ports``), ``free_ports`` of which may join a
    network already there (module docstring); costs are added by the caller."""
    if max_ports <= 0 or not ports or max_ports <= free_ports:
        return
    big = float(max_ports)
    gated = dict(ports)  # P - Pmax (1 - o): the rows below, switched off while o = 0
    shift = 0.0
    if free_ports > 0:
        own = model.var(own_var(tag), 0, 1)
        model.add(f"own_switches[{tag}]", {**ports, own: -(big - free_ports)}, "<=",
                  float(free_ports))
        gated[own] = big
        shift = big
    leaves = model.var(leaf_var(tag), 0, max(1, math.ceil(max_ports / max(radix // 2, 1))))
    model.add(f"switch_ports[{tag}]", {**gated, leaves: -float(radix)}, "<=", shift)
    if max_ports <= radix:
        return
    half = radix // 2
    lmax = math.ceil(max_ports / half)
    spines = model.var(spine_var(tag), 0, max(1, math.ceil(half * lmax / radix)))
    uplinks = model.var(uplink_var(tag), 0, half * lmax)
    two = model.var(tier_var(tag), 0, 1)
    model.add(f"two_tier_needed[{tag}]", {**gated, two: -(big - radix)}, "<=",
              float(radix) + shift)
    model.add(f"leaf_ports[{tag}]", {**gated, leaves: -float(half), two: big}, "<=",
              big + shift)
    model.add(f"spines[{tag}]", {spines: float(radix), leaves: -float(half),
                                 two: -float(half * lmax)}, ">=", -float(half * lmax))
    model.add(f"spine_present[{tag}]", {spines: 1.0, two: -1.0}, ">=", 0.0)
    model.add(f"uplinks[{tag}]", {uplinks: 1.0, leaves: -float(half),
                                  two: -float(half * lmax)}, ">=", -float(half * lmax))
