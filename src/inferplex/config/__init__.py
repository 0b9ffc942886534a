"""Configuration in one place: values, the property schema, device strings.

- :mod:`.values`: value parsers (booleans, sizes, seconds, choices);
- :mod:`.schema`: every key inferplex reads, its parser and who takes it;
- :mod:`.devices`: the device-string grammar, parsed once into a :class:`DeviceSpec`.

Device plugins own their own keys (``DevicePlugin.property_parsers``); the
registry resolves each device's settings from these (``DeviceRegistry.config_for``
and ``member_config``).
"""
