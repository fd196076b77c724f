"""A backend added by following docs/design.md#adding-a-backend: this folder plus the one
`@register_backend` line in plugin_trace_backend.py; nothing outside it names the backend."""

from plugin_trace.plugin_trace_backend import PluginTraceBackend
from plugin_trace.plugin_trace_config import PluginTraceBackendConfig

__all__ = ["PluginTraceBackend", "PluginTraceBackendConfig"]
