"""The demo's toy collection and its generator (see README.md here); used by the demos and tests."""
