"""The controller's RPCs, one module per API key (registered with ``registry.CONTROLLER``)."""
