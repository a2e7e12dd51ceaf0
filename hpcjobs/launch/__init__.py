"""Distributed launch, preemption and GPU sampling: settings resolved per job, and pure builders."""
