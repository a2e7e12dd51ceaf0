"""Sites against the live world: discovering a site from its scheduler, comparing and checking site files.

The layer between the scheduler backends and rendering. :mod:`hpcjobs.config` holds the site
schema and finds site files on disk without ever running a scheduler command; the modules here ask
the scheduler (through the backends' discovery hooks) or check a site file end to end:

* :mod:`.discover`: ``hpcjobs site init`` and detection: which scheduler answers on this machine,
  and the site read from it (cached per cluster under the user's config dir);
* :mod:`.diff`: ``hpcjobs site diff``, a site file against the live cluster;
* :mod:`.check`: ``hpcjobs site validate``, the schema, the site's own consistency and a test render
  through ``bash -n`` (the renderer, a layer above, is handed in).
"""
