# Type stubs for the headroom package. Keyword arguments are the command line's flags (see README).
import os
from typing import Any, Mapping, Sequence

import numpy as np

__version__: str

class InternalError(RuntimeError): ...
class CheckFailed(RuntimeError): ...

def run(*args: str) -> str: ...
def help(command: str = ...) -> str: ...
def estimate(*, model: str, seq: int, gpu: str = ..., cluster: str = ..., framework: str = ..., tp: int = ...,
             cp: int = ..., pp: int = ..., vpp: int = ..., mbs: int = ..., gpus: int = ..., dp: int = ...,
             gbs: int = ..., recompute: str = ..., schedule: str = ..., sharding: str = ..., no_sp: bool = ...,
             no_flash_attn: bool = ..., lora_rank: int = ..., lora_targets: list[str] = ..., profile: str = ...,
             data_dir: str = ..., **flags: Any) -> dict[str, Any]: ...
def mtsl(*, model: str, gpu: str = ..., cluster: str = ..., gpus: int = ..., tp: int = ..., dp: int = ...,
         cp: int = ..., pp: int = ..., mbs: int = ..., sharding: str = ..., lora_rank: int = ...,
         framework: str = ..., sweep: str = ..., target_seq: int = ..., profile: str = ...,
         **flags: Any) -> dict[str, Any]: ...
def rank(*, model: str, gpus: int, seq: int, gbs: int, gpu: str = ..., cluster: str = ..., framework: str = ...,
         lora_rank: int = ..., top: int = ..., constraint: list[str] = ..., profile: str = ...,
         **flags: Any) -> dict[str, Any]: ...
def launch(*, model: str, seq: int, gpu: str = ..., cluster: str = ..., framework: str = ..., tp: int = ...,
           cp: int = ..., pp: int = ..., vpp: int = ..., mbs: int = ..., gpus: int = ..., dp: int = ...,
           gbs: int = ..., recompute: str = ..., schedule: str = ..., sharding: str = ..., no_sp: bool = ...,
           no_flash_attn: bool = ..., lora_rank: int = ..., lora_targets: list[str] = ..., export: str = ...,
           data_dir: str = ..., **flags: Any) -> dict[str, Any]: ...
def comm(*, strategy: str = ..., params: float = ..., trainable: float = ..., gpus: int = ..., group_size: int = ...,
         accum: int = ..., optimizer_bytes: float = ..., list: bool = ..., compare: bool = ...,
         **flags: Any) -> dict[str, Any]: ...
def simulate(**flags: Any) -> dict[str, Any]: ...
def calibrate(**flags: Any) -> dict[str, Any]: ...
def validate(**flags: Any) -> dict[str, Any]: ...
def load_profile(path: str | os.PathLike[str]) -> dict[str, Any]: ...

class Stage:
    """Memory of one pipeline stage, bytes per GPU (integers, as in the JSON)."""
    stage: int
    params: int
    grads: int
    optimizer: int
    activations: int
    residual: int
    total: int

class Memory:
    paper_total_gib: float | None
    peak_gib: float
    peak_stage: int
    capacity_gib: float
    margin_gib: float
    verdict: str  # "fits", "oom" or "uncertain"
    peak_gib_interval: tuple[float, float] | None
    stages: list[Stage]

class Breakdown:
    gemm_s: float
    attention_s: float
    elementwise_s: float
    compute_s: float
    overhead_s: float
    tp_comm_s: float
    cp_comm_s: float
    pp_comm_s: float
    ep_comm_s: float
    dp_comm_s: float
    bubble_s: float
    optimizer_s: float
    offload_s: float
    slowest_stage: int

class Perf:
    step_time_s: float
    step_time_s_interval: tuple[float, float] | None
    interval_source: str
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    pts_s: float
    model_flops_per_step: float
    coefficients: str
    coefficients_source: str
    coefficients_gpu: str
    coefficients_fitted_under: str
    coefficients_scale: dict[str, float]
    link_coefficients_source: str
    breakdown: Breakdown

class Estimate:
    """One layout's memory and speed, equal to ``headroom estimate --json``."""
    memory: Memory
    perf: Perf

class Planner:
    def __init__(self, *, model: str, cluster: str = ..., gpu: str = ..., framework: str = ...,
                 profile: str | os.PathLike[str] = ..., data_dir: str | os.PathLike[str] = ...) -> None: ...
    @property
    def cluster(self) -> str: ...
    @property
    def cluster_assumed(self) -> bool: ...
    @property
    def cluster_source(self) -> str: ...
    def estimate(self, *, seq: int, tp: int = ..., cp: int = ..., pp: int = ..., vpp: int = ..., ep: int = ...,
                 etp: int | None = ..., mbs: int = ...,
                 gpus: int | None = ..., dp: int | None = ..., gbs: int | None = ..., recompute: str | None = ...,
                 schedule: str | None = ..., sharding: str | None = ..., sequence_parallel: bool | None = ...,
                 flash_attention: bool | None = ..., lora_rank: int | None = ...,
                 lora_targets: str | Sequence[str] | None = ..., moe_token_dispatcher_type: str | None = ...,
                 moe_expert_capacity_factor: float | None = ..., precision: str | None = ...,
                 fp8_recipe: str | None = ..., fp8_param_gather: bool | None = ...,
                 optimizer_offload_fraction: float | None = ..., overlap_cpu_optimizer_d2h_h2d: bool | None = ...,
                 cpu_offloading_num_layers: int | None = ...,
                 overlap_p2p_comm: bool | None = ..., tp_comm_overlap: bool | None = ...) -> Estimate: ...
    def estimate_many(self, columns: Mapping[str, Any], *, on_error: str = ...,
                      threads: int = ...) -> dict[str, np.ndarray]: ...
    def mtsl(self, *, tp: int = ..., cp: int = ..., pp: int = ..., vpp: int = ..., ep: int = ...,
             etp: int | None = ..., mbs: int = ...,
             gpus: int | None = ..., dp: int | None = ..., gbs: int | None = ..., recompute: str | None = ...,
             schedule: str | None = ..., sharding: str | None = ..., sequence_parallel: bool | None = ...,
             flash_attention: bool | None = ..., lora_rank: int | None = ...,
             lora_targets: str | Sequence[str] | None = ..., precision: str | None = ...,
             fp8_recipe: str | None = ..., fp8_param_gather: bool | None = ...,
             optimizer_offload_fraction: float | None = ..., overlap_cpu_optimizer_d2h_h2d: bool | None = ...,
             cpu_offloading_num_layers: int | None = ...,
             overlap_p2p_comm: bool | None = ..., tp_comm_overlap: bool | None = ...) -> dict[str, Any]: ...
    def rank(self, **search: Any) -> dict[str, Any]: ...
