"""Pure scheduling code: no threads, no clocks (the time comes in as a number).

- :mod:`.policies`: which device takes the next waiting request
  (DEVICE_PRIORITY, ROUND_ROBIN, EARLIEST_FINISH);
- :mod:`.host_gain`: whether a host device beside accelerators pays for what it costs them;
- :mod:`.latency`: a device's latency estimate, robust to warm-up runs;
- :mod:`.quarantine`: the cool-down of a device that failed a request;
- :mod:`.options`: MULTI's and AUTO's scheduling settings, read from a compile config.

The MULTI/AUTO dispatcher (:mod:`inferplex.engine.dispatcher`) feeds them numbers
on its events; tests drive them the same way, with no device.
"""
