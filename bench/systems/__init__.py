"""One module per benchmarked system, each exposing `WORKLOADS` (name -> workload) and `describe()`.

The worker imports only the module of the system it runs, so the LionAGI side never needs lionmsg and
the lionmsg side never needs LionAGI.
"""
