"""The diagnostic service: checkable work in steps, for testing the job runtime."""
