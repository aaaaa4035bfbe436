"""Tests: reads."""
