"""The PBS stand-in fixture for the PBS/Torque backend tests."""

from pbs_standin.fixture import pbs_standin  # noqa: F401
