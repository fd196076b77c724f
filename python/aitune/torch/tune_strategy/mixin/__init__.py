"""AITune's `tune_strategy.mixin` package. aitune's strategies are not assembled from mixins (every
strategy has enable_find_max_batch_size() and enable_performance_validation()); the result type
of the performance gate is here under AITune's name."""

from aitune.torch.tune_strategy.strategy_results import PerformanceValidationMixinResult

__all__ = ["PerformanceValidationMixinResult"]
