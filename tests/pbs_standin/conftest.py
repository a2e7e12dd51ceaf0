"""Make the PBS stand-in fixture available to the tests in this folder."""

from pbs_standin.fixture import pbs_standin  # noqa: F401
