"""Entries that outlive the process: the disk cache (TRACER_CACHE_DIR, tracer.config.cache_dir).

portable.py   descriptions of live objects another process can rebuild (the codec)
guards_io.py  an entry's guards as their kinds, facts and source paths
graph_io.py   its graph, node by node; compiled by the backend on its first call
entry_io.py   one entry as a record (code, guards, graph, breaks, dependencies' digests)
library_io.py what the entry read from library namespaces without guards, checked when read
store.py      the directory: keys, atomic writes, corrupt files ignored

The runtime calls the store through `runtime.cache.OPEN_STORE` (set by the face): it loads a
code object's entries at its first miss and saves each new entry after its trace.
"""
