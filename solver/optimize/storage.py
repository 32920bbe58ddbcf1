"""Checkpoint and dataset storage bought for a training job, sized from the model state.

For a training workload of a model with ``params`` parameters:
    trained parameters   full fine-tune / pretrain: all of them; LoRA/QLoRA: the adapters
                         (rank r on every linear layer, efficiency.yaml ``lora_rank``)
    checkpoint bytes     trained × ``checkpoint_bytes_per_param`` (weights + fp32 master +
                         Adam; the gradients are not checkpointed)
    capacity TB          (checkpoint × ``checkpoints_kept``
                          + frozen base weights at 2 B/param (LoRA/QLoRA only)
                          + dataset_tokens × ``dataset_bytes_per_token``) / 1e12
    write GB/s           checkpoint / ``checkpoint_write_seconds`` / 1e9
    cost                 capacity × ``storage_usd_per_tb`` + write GB/s × ``storage_usd_per_gbps``
The job's storage does not depend on its layout, so the MIP charges it on every owned
candidate of the job (exactly one is chosen) and the bill of materials recomputes it from the
plan. A job run on rented instances buys none: its checkpoints and dataset stay on the
instances' own disks, which the hourly price includes (solver/optimize/rental.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import factors
from solver.optimize.costs import CostParams
from solver.physics.geometry import geometry
from solver.rfq.schema import TrainingWorkload

FROZEN_BASE_BYTES_PER_PARAM = 2.0  # bf16 copy of the frozen base model (LoRA/QLoRA)


@dataclass(frozen=True)
class TrainingStorage:
    """Storage one training job needs: capacity (TB), write bandwidth (GB/s) and cost."""

    workload: str
    capacity_tb: float
    write_gbps: float
    capacity_usd: float
    bandwidth_usd: float

    @property
    def usd(self) -> float:
        return self.capacity_usd + self.bandwidth_usd


def training_storage(catalog: Catalog, params: CostParams, spec: TrainingWorkload
                     ) -> TrainingStorage:
    """Storage of one training workload (module docstring)."""
    model = catalog.model(spec.model)
    total = model.params_b * 1e9
    if spec.kind in ("lora", "qlora"):
        geo = geometry(model)
        trained = factors(catalog).training.lora_rank.value * geo.lora_params_per_layer \
            * geo.layers
        frozen = total * FROZEN_BASE_BYTES_PER_PARAM
    else:
        trained = total
        frozen = 0.0
    checkpoint = trained * params.checkpoint_bytes_per_param
    dataset = float(spec.dataset_tokens) * params.dataset_bytes_per_token
    capacity_tb = (checkpoint * params.checkpoints_kept + frozen + dataset) / 1e12
    write_gbps = checkpoint / params.checkpoint_write_seconds / 1e9
    return TrainingStorage(spec.name, capacity_tb, write_gbps,
                           capacity_tb * params.storage_usd_per_tb,
                           write_gbps * params.storage_usd_per_gbps)
