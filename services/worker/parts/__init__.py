"""The load hosts of one run (spec ``load_hosts``) on the worker's side: each part's share, the barrier arithmetic, the parts link and the part session."""
