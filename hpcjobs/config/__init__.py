"""Experiment and site configuration: YAML files, their schemas, and where they are found."""
