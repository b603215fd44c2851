"""LIBERO for WMRL. Importing it registers the suites' gymnasium ids (:mod:`wmrl_libero.gym_registration`)."""

from wmrl_libero.gym_registration import register_gym_envs

register_gym_envs()
