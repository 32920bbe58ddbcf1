"""Expected goodput of a long training job: the share of wall-clock time that advances it.

A synchronous job of ``n`` GPUs stops whenever any of them fails. With failures at
``rate`` per GPU-hour (efficiency.yaml ``goodput``, sourced from Meta's Llama 3 report) the
job fails ``lam = n x rate`` times per hour. Each failure costs the restart time ``R`` plus
the work since the last checkpoint, half an interval ``tau / 2`` on average; every
checkpoint blocks training for ``C`` hours (the full state written by all nodes in parallel
to shared storage, of which the training step waits for the blocking share). Per hour of
progress the job therefore spends

    1 + C / tau + lam (R + tau / 2)

hours, and goodput is the inverse. Deadlines are planned at expected goodput:
``hours = tokens / tokens_per_s / 3600 / goodput``.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import factors
from solver.physics.geometry import geometry
from solver.physics.layout import Estimate

GB = 1e9


@dataclass(frozen=True)
class Goodput:
    """Expected goodput of one job and where the lost time goes (hours per hour of work)."""

    fraction: float
    failures_per_hour: float
    checkpoint_hours: float
    failure_loss: float
    checkpoint_loss: float


IDEAL = Goodput(1.0, 0.0, 0.0, 0.0, 0.0)


def checkpoint_bytes(catalog: Catalog, est: Estimate) -> float:
    """Bytes one checkpoint writes: the whole model state for full training (weights,
    fp32 master and Adam moments: ``model_state_bytes_per_param`` less the gradients), the
    adapters and their optimizer state for LoRA/QLoRA (the frozen base is not saved)."""
    return _checkpoint_bytes(catalog, est.layout.model, est.workload.kind)


def _checkpoint_bytes(catalog: Catalog, model_id: str, kind: str) -> float:
    eff = factors(catalog)
    model = catalog.model(model_id)
    state = eff.training.model_state_bytes_per_param.value - 2.0  # gradients are not saved
    if kind in ("lora", "qlora"):
        geo = geometry(model)
        adapters = eff.training.lora_rank.value * geo.lora_params_per_layer * geo.layers
        return adapters * state
    return model.params_b * 1e9 * state


def goodput(catalog: Catalog, est: Estimate) -> Goodput:
    """Expected goodput of the training job ``est`` (1.0 without a ``goodput`` section)."""
    if not est.fits:
        return IDEAL
    return job_goodput(catalog, est.layout.model, est.workload.kind, est.layout.gpus,
                       est.layout.nodes_spanned)


def job_goodput(catalog: Catalog, model_id: str, kind: str, gpus: int,
                nodes_spanned: int) -> Goodput:
    """Expected goodput of a job that fits, from what it depends on: the model and kind
    (the checkpoint's bytes), the GPUs (failures) and the nodes (checkpoint write
    bandwidth). Every split and knob setting of one job size gets the same figure, which
    lets the candidate stage bound a size's hours before estimating any split."""
    g = factors(catalog).goodput
    if g is None:
        return IDEAL
    lam = gpus * g.failure_rate_per_gpu_hour.value
    nodes = max(1, nodes_spanned)
    write_s = _checkpoint_bytes(catalog, model_id, kind) / (
        nodes * g.checkpoint_write_gbs_per_node.value * GB)
    ckpt_h = write_s * g.checkpoint_blocking_fraction.value / 3600.0
    tau = g.checkpoint_interval_hours.value
    failure_loss = lam * (g.restart_hours.value + tau / 2.0)
    checkpoint_loss = ckpt_h / tau
    return Goodput(1.0 / (1.0 + checkpoint_loss + failure_loss), lam, ckpt_h, failure_loss,
                   checkpoint_loss)


def hours_at_goodput(catalog: Catalog, est: Estimate, tokens: float) -> float:
    """Wall-clock hours to train ``tokens`` tokens at the job's expected goodput."""
    if est.predicted.tokens_per_s <= 0:
        return float("inf")
    return tokens / est.predicted.tokens_per_s / 3600.0 / goodput(catalog, est).fraction
