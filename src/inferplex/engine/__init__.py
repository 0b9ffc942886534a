"""The request engine: the one life of an inference request.

- :mod:`.request`: :class:`Request` carries a ``concurrent.futures.Future``, the
  one place where a started request ends exactly once, with a result or an error.
- :mod:`.device_pool`: one pool of worker threads per compiled device program.
- :mod:`.chain`: HETERO and PIPELINE_PARALLEL as stages chained over device pools.
- :mod:`.dispatcher`: MULTI and AUTO, one dispatcher thread per compiled model.
- :mod:`.completions`: user callbacks, off the devices' threads.
- :mod:`.lifecycle`: release, garbage collection and a bounded interpreter exit.
- :mod:`.trace`: the optional timeline of each request's stages.
"""
