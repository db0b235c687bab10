"""Everything two services need: config, db, bus, tasks, rpc runtime, artifacts, CLI and SDK."""
