"""The development stack: the embedded `paperworks up`, its processes, `make demo`, the
deploy-file generator and proto generation. Never imported by servers or workers.
"""
