"""YAML configuration: loading, secrets, validation with the path of the bad field."""

from watukuy.config.loader import TOP_LEVEL_KEYS, load_config, parse_config
from watukuy.config.model import (
    KafkaProperties,
    RestSettings,
    RunnerConfig,
    RunnerSettings,
    TopicsConfig,
)
from watukuy.core.errors import ConfigError
from watukuy.options.secrets import REDACTED

__all__ = [
    "REDACTED",
    "TOP_LEVEL_KEYS",
    "ConfigError",
    "KafkaProperties",
    "RestSettings",
    "RunnerConfig",
    "RunnerSettings",
    "TopicsConfig",
    "load_config",
    "parse_config",
]
