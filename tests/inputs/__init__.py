"""Tests: inputs."""
